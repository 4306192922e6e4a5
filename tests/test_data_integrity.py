"""Damaged data is caught at load time and repaired by `make data` (fetch.prepare).

Small datasets in temp dirs, built by `fetch.prepare` with a toy build step (no download):
a truncated corpus, a flipped byte in glove/vectors.npy and an unreadable MANIFEST.json each
raise `DatasetCorrupt` naming the file and `make data` when a loader reads them, and the next
`prepare` (what `make data` runs) repairs them. The damaged lesson-07 cache is tested in
test_encoder.py (it needs the tiny encoder).
"""

from __future__ import annotations

import hashlib
import io
import os

import numpy as np
import pytest

from minattn.course import data, fetch
from minattn.course.data import DatasetCorrupt

PTB = {f"ptb.{s}.txt": f"the {s} text <unk> of a tiny corpus\n" * 20 for s in data.SPLITS}
VOCAB = "the\ncat\nsat\n"


def npy_bytes(array) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


VECTORS = npy_bytes(np.arange(6, dtype=np.float32).reshape(3, 2) / 8)


def make(root, name, contents):
    """Build dataset `name` under root with fetch.prepare, as a data script does."""
    files = {f: hashlib.sha256(c if isinstance(c, bytes) else c.encode()).hexdigest()
             for f, c in contents.items()}

    def build(archive, stage):
        for fname, content in contents.items():
            (stage / fname).write_bytes(content if isinstance(content, bytes) else content.encode())
        return {"items": len(contents)}

    return fetch.prepare(name, files, build, root=root)


def touch_later(path):
    """Move the modification time on: a damaged file is re-verified even within one second."""
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))


def test_manifest_records_the_digests_and_loaders_read_verified_files(tmp_path):
    make(tmp_path, "ptb", PTB)
    assert "sha256" in (tmp_path / "ptb" / "MANIFEST.json").read_text()
    assert data.load_lm_text("ptb", "train", data_dir=tmp_path) == PTB["ptb.train.txt"]


def test_a_truncated_corpus_is_refused_and_make_data_repairs_it(tmp_path, capsys):
    make(tmp_path, "ptb", PTB)
    path = tmp_path / "ptb" / "ptb.train.txt"
    data.load_lm_text("ptb", "train", data_dir=tmp_path)  # verified once, then cached
    path.write_text(PTB["ptb.train.txt"][: len(PTB["ptb.train.txt"]) // 2])
    with pytest.raises(DatasetCorrupt, match=r"ptb\.train\.txt.*make data"):
        data.load_lm_text("ptb", "train", data_dir=tmp_path)
    make(tmp_path, "ptb", PTB)  # what `make data` runs
    assert "does not match" in capsys.readouterr().out
    assert data.load_lm_text("ptb", "train", data_dir=tmp_path) == PTB["ptb.train.txt"]


def test_a_flipped_byte_in_glove_vectors_is_refused_and_repaired(tmp_path):
    glove = {"vectors.npy": VECTORS, "vocab.txt": VOCAB}
    make(tmp_path, "glove", glove)
    vocab, vectors = data.load_glove(data_dir=tmp_path)
    assert vocab == ["the", "cat", "sat"]
    path = tmp_path / "glove" / "vectors.npy"
    flipped = bytearray(VECTORS)
    flipped[-1] ^= 0x7F  # the last float's exponent byte: a huge number, the same file size
    path.write_bytes(bytes(flipped))
    touch_later(path)
    with pytest.raises(DatasetCorrupt, match=r"vectors\.npy.*make data"):
        data.load_glove(data_dir=tmp_path)
    make(tmp_path, "glove", glove)
    np.testing.assert_array_equal(data.load_glove(data_dir=tmp_path)[1],
                                  np.load(io.BytesIO(VECTORS)))


@pytest.mark.parametrize("manifest", ["{not json", "[1, 2]", b"\xff\xfe\x00"])
def test_an_unreadable_manifest_is_refused_and_rebuilt(tmp_path, capsys, manifest):
    make(tmp_path, "ptb", PTB)
    path = tmp_path / "ptb" / "MANIFEST.json"
    path.write_bytes(manifest if isinstance(manifest, bytes) else manifest.encode())
    with pytest.raises(DatasetCorrupt, match=r"MANIFEST\.json.*make data"):
        data.load_lm_text("ptb", "valid", data_dir=tmp_path)
    assert make(tmp_path, "ptb", PTB) == {"source": None, "items": 3}  # rebuilt, no failure
    assert "unreadable" in capsys.readouterr().out
    assert data.load_lm_text("ptb", "valid", data_dir=tmp_path) == PTB["ptb.valid.txt"]


def test_an_old_manifest_gains_the_digests(tmp_path):
    make(tmp_path, "ptb", PTB)
    path = tmp_path / "ptb" / "MANIFEST.json"
    path.write_text('{"source": null, "items": 3}\n')  # as written before digests were kept
    data.load_lm_text("ptb", "test", data_dir=tmp_path)  # nothing to check against: loads
    make(tmp_path, "ptb", PTB)
    assert '"sha256"' in path.read_text()
