"""SST-2 (GLUE version), the sentiment benchmark of the papers. Needs a network.

    python data_scripts/sst2.py   ->   data/sst2/{SST-2.zip, train.tsv, dev.tsv, test.tsv}

67,349 train / 872 dev / 1,821 test sentences (test labels withheld by GLUE). The lessons
use the packaged Rotten Tomatoes sentences (data_scripts/sentiment.py) by default; nothing
depends on this script. The archive's sha256 is the one pinned by several public projects
for this URL; the members are pinned through it (and zip's own CRC).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from minattn.course.fetch import fetch_archives, run_main  # noqa: E402

NAME = "sst2"
ARCHIVES = {"SST-2.zip": ("https://dl.fbaipublicfiles.com/glue/data/SST-2.zip",
                          "d67e16fb55739c1b32cdce9877596db1c127dc322d93c082281f64057c16deaa")}
MEMBERS = {f"{split}.tsv": ("SST-2.zip", f"SST-2/{split}.tsv", None)
           for split in ("train", "dev", "test")}


def main(root=None):
    return fetch_archives(NAME, ARCHIVES, MEMBERS, root)


if __name__ == "__main__":
    run_main(main)
