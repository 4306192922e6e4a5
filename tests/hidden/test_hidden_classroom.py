"""Teacher-only tests. First, probes of exercises 1.1 and 1.2 beyond what tests/test_attention.py
shows students: several shapes, random and broadcast masks, rows far apart in scale (where a
softmax that subtracts one max for the whole array, instead of each row's, breaks down).

Then the grader under attack, as a class might try it: one grading run of three submissions
of exercises 1.1 and 1.2, shared by the tests below (the attacks need a wrong softmax or the
teacher's answer to build them, so they live here, where no student copy reaches):
- evil (graded first) hunts for the other submissions and the teacher's checkout from inside
  its softmax: reads every /proc/<pid>/cmdline, tries to overwrite every copy of that library
  file and every CSV it can name, drops a file in each folder, and reports what it saw in its
  error message;
- cheat writes no solution: its 1.1 registers an atexit hook that rewrites any report JSON it
  finds, replaces numpy.testing and torch.testing's asserts with no-ops, then calls
  pytest.skip (numpy) or returns zeros (torch); its 1.2 calls sys.exit(0)
  (numpy) or returns an object equal to everything (torch); its manifest claims exercises
  9.9 and 9.8;
- honest is the teacher's solution.
"""

import csv
import json
import os
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from minattn.attention import attention_np, attention_torch, softmax_np
from minattn.course import REPO_ROOT
from minattn.course.classroom import grading
from minattn.course.classroom.copies import make_student_copy, source_files
from minattn.course.classroom.regions import BEGIN, END, all_exercises, find_exercises
from minattn.course.classroom.sandbox import sandbox_problem

# The library file of exercises 1.1 and 1.2 (softmax, attention forward), relative to a checkout.
LIB = next(e.path for e in all_exercises(REPO_ROOT) if e.id == "1.1")


def per_row_softmax(x, mask):
    """The definition, one row at a time."""
    out = np.zeros_like(x)
    for index in np.ndindex(x.shape[:-1]):
        keep = mask[index]
        if keep.any():
            row = x[index][keep]
            e = np.exp(row - row.max())
            out[index][keep] = e / e.sum()
    return out


@pytest.mark.hidden
@pytest.mark.exercise("1.1")
@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4, 6)])
def test_softmax_random_masks_and_scales(shape):
    rng = np.random.default_rng(11)
    x = rng.standard_normal(shape) * 30 + rng.choice([-700.0, 0.0, 700.0], size=shape[:-1] + (1,))
    mask = rng.random(shape) < 0.6
    mask[..., 0] = len(shape) == 1 or mask[..., 0]  # some rows keep entry 0 ...
    if len(shape) > 1:
        mask.reshape(-1, shape[-1])[0] = False  # ... and one row is fully masked
    np.testing.assert_allclose(softmax_np(x, mask), per_row_softmax(x, mask),
                               rtol=1e-12, atol=1e-300)


@pytest.mark.hidden
@pytest.mark.exercise("1.1")
def test_softmax_broadcast_padding_mask():
    rng = np.random.default_rng(12)
    x = rng.standard_normal((2, 3, 4, 5))
    mask = np.arange(5)[None, None, None, :] < np.array([5, 2])[:, None, None, None]  # (2, 1, 1, 5)
    expected = per_row_softmax(x, np.broadcast_to(mask, x.shape))
    np.testing.assert_allclose(softmax_np(x, mask), expected, rtol=1e-12, atol=1e-300)


def far_apart_rows():
    """Queries whose score rows lie about a thousand apart: exp(row - global max) underflows
    to 0 for every row but the top one; each row's own max keeps them all."""
    q = np.array([[[80.0, 0.0], [-80.0, 0.0], [0.3, 0.1]]])  # (1, 3, 2)
    k = np.array([[[10.0, 1.0], [11.0, -1.0], [12.0, 0.0], [9.0, 2.0]]])  # (1, 4, 2)
    v = np.arange(12.0).reshape(1, 4, 3)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(2)
    w = per_row_softmax(scores, np.ones(scores.shape, bool))
    return q, k, v, w @ v, w


@pytest.mark.hidden
@pytest.mark.exercise("1.2")
def test_attention_rows_far_apart_in_scale():
    q, k, v, out, w = far_apart_rows()
    got_out, got_w = attention_np(q, k, v)
    np.testing.assert_allclose(got_w, w, rtol=1e-10, atol=1e-300)
    np.testing.assert_allclose(got_out, out, rtol=1e-10, atol=1e-12)
    t_out, t_w = attention_torch(*map(torch.tensor, (q, k, v)))
    np.testing.assert_allclose(t_w.numpy(), w, rtol=1e-10, atol=1e-300)
    np.testing.assert_allclose(t_out.numpy(), out, rtol=1e-10, atol=1e-12)


def global_max_softmax(scores, mask=None):
    """A wrong softmax: one max for the whole array."""
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    exp = np.exp(scores - scores.max())
    total = exp.sum(axis=-1, keepdims=True)
    return exp / np.where(total == 0.0, 1.0, total)


def global_max_softmax_torch(scores, mask=None):
    return torch.from_numpy(global_max_softmax(scores.detach().numpy(),
                                               None if mask is None else mask.numpy()))


def test_a_global_max_softmax_passes_the_visible_attention_tests_but_not_the_hidden_one(
        monkeypatch):
    attention = sys.modules[softmax_np.__module__]  # where attention_np finds its softmax
    sys.path.insert(0, str(REPO_ROOT / "tests"))
    try:
        import test_attention as visible
    finally:
        sys.path.remove(str(REPO_ROOT / "tests"))
    monkeypatch.setattr(attention, "softmax_np", global_max_softmax)
    monkeypatch.setattr(attention, "softmax_torch", global_max_softmax_torch)
    for use_mask in (False, True):  # the gap the hidden test closes
        visible.test_numpy_matches_torch_float64(np.random.default_rng(0), use_mask)
    visible.test_weights_rows_sum_to_one_and_respect_mask(np.random.default_rng(0))
    with pytest.raises(AssertionError):
        test_attention_rows_far_apart_in_scale()


# ============================================================================ the grader attacked
def tree(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(Path(root).rglob("*"))
            if p.is_file()}


def region_lines(text: str, function: str):
    """(BEGIN index, END index) of the region inside `function`, 0-based."""
    lines = text.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith(f"def {function}("))
    begin = next(i for i in range(start, len(lines)) if BEGIN.match(lines[i]))
    end = next(i for i in range(begin, len(lines)) if END.match(lines[i]))
    return lines, begin, end


def with_bodies(path: Path, bodies: dict[str, str]) -> None:
    """Rewrite the regions of these functions of a student's file with these bodies."""
    text = path.read_text()
    for function, body in bodies.items():
        lines, begin, end = region_lines(text, function)
        lines[begin + 1:end] = [body if body.endswith("\n") else body + "\n"]
        text = "".join(lines)
    path.write_text(text)


EVIL = '''    import json
    import os
    import pathlib
    targets = {targets!r}
    for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
        try:
            cmdline = open(f"/proc/{{pid}}/cmdline", "rb").read().decode(errors="replace")
        except OSError:
            continue
        targets += [w for w in cmdline.split("\\0") if w.startswith("/") and os.path.isdir(w)]
    seen = {{t: sorted(os.listdir(t)) for t in set(targets) if os.path.isdir(t) and os.listdir(t)}}
    for t in seen:
        for folder, subfolders, files in os.walk(t):
            subfolders[:] = [s for s in subfolders if s != ".venv"]  # nothing to ruin there
            for f in files:
                if f == {lib_name!r} or f.endswith(".csv"):
                    try:
                        pathlib.Path(folder, f).write_text("raise SystemExit('overwritten')\\n")
                    except OSError:
                        pass
        try:
            pathlib.Path(t, "EVIL_WAS_HERE").write_text("x")
        except OSError:
            pass
    processes = [p for p in os.listdir("/proc") if p.isdigit()]
    raise RuntimeError(f"evil saw {{json.dumps(seen)}} and {{len(processes)}} processes")
'''

CHEAT_SOFTMAX = '''    import atexit
    import glob
    import json
    import numpy.testing

    def forge():
        for path in (glob.glob("/tmp/**/*.json", recursive=True)
                     + glob.glob("/home/**/*.json", recursive=True)):
            try:
                with open(path, "w") as f:
                    json.dump({"exercises": {"1.1": {"tests": [], "passed": 99, "failed": 0}}}, f)
            except OSError:
                pass
    atexit.register(forge)
    numpy.testing.assert_allclose = lambda *args, **kwargs: None
    numpy.testing.assert_array_equal = lambda *args, **kwargs: None
    import torch.testing
    torch.testing.assert_close = lambda *args, **kwargs: None
'''
CHEAT_SKIP = CHEAT_SOFTMAX + '''    import pytest
    pytest.skip("nothing to grade here")
'''
CHEAT_ZEROS = CHEAT_SOFTMAX + '''    return scores * 0  # wrong, with every assert patched out
'''

CHEAT_EXIT = '''    import sys
    sys.exit(0)  # (the hard exit, os._exit(0), is tests/test_exercises.py's a/alice: cheaper there)
'''

CHEAT_EQUAL = '''    class Always:
        def __eq__(self, other):
            return True
        __array_priority__ = 1000
    return Always(), Always()
'''


@pytest.fixture(scope="module")
def trial(tmp_path_factory):
    if (problem := sandbox_problem()) is not None:
        pytest.skip(f"the sandboxed grader needs its sandbox: {problem}")
    base = tmp_path_factory.mktemp("trial")
    teacher = base / "teacher"  # the teacher's checkout: a copy, in case a sandbox ever failed
    for rel in source_files(REPO_ROOT, student=False):
        (teacher / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / rel, teacher / rel)
    ids = [e.id for e in find_exercises((teacher / LIB).read_text())
           if e.id in ("1.1", "1.2")]
    subs = base / "class"
    evil, cheat, honest = subs / "evil", subs / "cheat", subs / "honest"
    for sub in (evil, cheat, honest):
        make_student_copy(sub, teacher, only=["1.1", "1.2"])
    solution = teacher / LIB
    (honest / LIB).write_text(solution.read_text())
    out = base / "gradebook" / "grades.csv"
    out.parent.mkdir()
    out.write_text("earlier grades\n")
    targets = [str(honest), str(teacher), str(REPO_ROOT), str(out.parent), str(subs)]
    body = EVIL.format(targets=targets, lib_name=LIB.name)
    with_bodies(evil / LIB, {"softmax_np": body, "softmax_torch": body})
    with_bodies(cheat / LIB, {
        "softmax_np": CHEAT_SKIP, "softmax_torch": CHEAT_ZEROS,
        "attention_np": CHEAT_EXIT, "attention_torch": CHEAT_EQUAL})
    manifest = json.loads((cheat / ".student-copy").read_text())
    (cheat / ".student-copy").write_text(json.dumps(dict(manifest, exercises=["9.9", "9.8"])))
    before = {"teacher": tree(teacher), "honest": tree(honest),
              "repository": (REPO_ROOT / LIB).read_bytes()}
    rows = grading.grade([evil, cheat, honest], out, only=["1.1", "1.2"], root=teacher,
                         timeout=300, hide=[REPO_ROOT])
    return dict(base=base, teacher=teacher, honest=honest, out=out, before=before, ids=ids,
                rows={(r["submission"], r["exercise"]): r for r in rows})


@pytest.mark.slow
def test_the_gradebook_has_the_teachers_exercises_and_totals_for_everyone(trial):
    rows = trial["rows"]
    assert [r["submission"] for r in csv.DictReader(trial["out"].open())] == \
        ["evil"] * 2 + ["cheat"] * 2 + ["honest"] * 2
    assert sorted(rows) == sorted((s, e) for s in ("evil", "cheat", "honest")
                                  for e in ("1.1", "1.2"))
    for ex_id in ("1.1", "1.2"):
        totals = {int(rows[s, ex_id]["total"]) for s in ("evil", "cheat", "honest")}
        marked = sum(p.read_text().count(f'@pytest.mark.exercise("{ex_id}")')
                     for p in (trial["teacher"] / "tests").rglob("test_*.py"))
        assert len(totals) == 1 and totals.pop() >= marked > 0, (ex_id, totals, marked)


def test_cheat_gets_nothing_from_patching_skipping_or_exiting(trial):
    rows = trial["rows"]
    for ex_id in ("1.1", "1.2"):
        row = rows["cheat", ex_id]
        assert int(row["passed"]) == 0 and int(row["total"]) > 0, row
    skipped = rows["cheat", "1.1"]["first_failure"]
    assert "SubmissionError: Skipped: nothing to grade here" in skipped
    assert "SubmissionError: SystemExit: 0" in rows["cheat", "1.2"]["first_failure"]


def test_evil_sees_nothing_and_changes_nothing(trial):
    first = trial["rows"]["evil", "1.1"]["first_failure"]
    saw = re.search(r"evil saw (\{.*\}) and (\d+) processes", first)
    assert saw and int(saw[2]) <= 2, first  # bwrap's init and the worker: no grader, no pytest
    # the only thing left to see: the read-only mount point of the environment (a venv that
    # lives in the checkout), empty of anything else
    python = {os.path.realpath(d) for d in (sys.prefix, sys.base_prefix)}
    for folder, entries in json.loads(saw[1]).items():
        paths = [os.path.join(folder, e) for e in entries]
        assert all(p in python or any(q.startswith(p + "/") for q in python)
                   for p in paths), first
    assert int(trial["rows"]["evil", "1.1"]["passed"]) == 0
    assert tree(trial["teacher"]) == trial["before"]["teacher"]
    assert (REPO_ROOT / LIB).read_bytes() == trial["before"]["repository"]
    assert tree(trial["honest"]) == trial["before"]["honest"]
    assert not list(trial["base"].rglob("EVIL_WAS_HERE"))


def test_honest_graded_after_them_gets_every_test(trial):
    rows = trial["rows"]
    for ex_id in ("1.1", "1.2"):
        row = rows["honest", ex_id]
        assert int(row["passed"]) == int(row["total"]) > 0 and row["first_failure"] == "", row
