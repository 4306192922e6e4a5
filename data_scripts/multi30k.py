"""Multi30k (WMT16 multimodal task 1), English-German image captions. Needs a network.

    python data_scripts/multi30k.py   ->   data/multi30k/{train,val,test}.{en,de}

29,000 / 1,014 / 1,000 caption pairs. The original host is gone; these are the mirror URLs
and sha256 digests that torchtext's Multi30k dataset uses. The lessons use the packaged
Bible pairs (data_scripts/bible.py) by default; nothing depends on this script.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from minattn.course.fetch import fetch_archives, run_main  # noqa: E402

NAME = "multi30k"
MIRROR = "https://raw.githubusercontent.com/neychev/small_DL_repo/master/datasets/Multi30k/"
ARCHIVES = {
    "training.tar.gz": (MIRROR + "training.tar.gz",
                        "20140d013d05dd9a72dfde46478663ba05737ce983f478f960c1123c6671be5e"),
    "validation.tar.gz": (MIRROR + "validation.tar.gz",
                          "a7aa20e9ebd5ba5adce7909498b94410996040857154dab029851af3a866da8c"),
    "mmt16_task1_test.tar.gz": (MIRROR + "mmt16_task1_test.tar.gz",
                                "6d1ca1dba99e2c5dd54cae1226ff11c2551e6ce63527ebb072a1f70f72a5cd36"),
}
MEMBERS = {f"{split}.{lang}": (archive, f"{split}.{lang}", None)
           for split, archive in (("train", "training.tar.gz"), ("val", "validation.tar.gz"),
                                  ("test", "mmt16_task1_test.tar.gz"))
           for lang in ("en", "de")}


def main(root=None):
    return fetch_archives(NAME, ARCHIVES, MEMBERS, root)


if __name__ == "__main__":
    run_main(main)
