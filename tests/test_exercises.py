"""The classroom machinery (minattn/tools/exercises.py): markers and stripping; student copies
that never destroy a file they did not write; no unmarked twin giving an answer away; lessons that
refuse another checkout's minattn and stop in one line on an unimplemented exercise; the
student's check; grading submissions against hidden tests into a CSV.

Fast tests use a small fake course in tmp_path. The slow ones share one full student copy."""

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from minattn.tools import exercises as ex
from minattn.tools import grading
from minattn.tools.exercise_audit import _functions, find_giveaways
from minattn.tools.exercises import (all_exercises, by_id, expand_ids, find_exercises,
                                     make_student_copy, strip_solutions)
from minattn.tools.grading import splice
from minattn.tools.lesson import REPO_ROOT

SOURCE = '''def f(x):
    """doc"""
    y = x + 1
    # BEGIN EXERCISE 9.1 implement: add two to x (~5 min)
    z = y + 1
    return z
    # END EXERCISE


def f_torch(x):
    # BEGIN EXERCISE 9.1
    return x + 2
    # END EXERCISE


def g(x):
    # BEGIN EXERCISE 9.2 double x
    return 2 * x
    # END EXERCISE
'''


def run_ns(text):
    namespace = {}
    exec(compile(text, "<student>", "exec"), namespace)
    return namespace


# ============================================================================ markers
def test_markers_kind_time_and_twins_without_a_description():
    found = find_exercises(SOURCE)
    assert [(e.id, e.kind, e.minutes) for e in found] == [
        ("9.1", "implement", 5), ("9.1", "implement", None), ("9.2", "implement", None)]
    assert found[0].what == "add two to x" and found[2].what == "double x"  # no kind: implement
    student = strip_solutions(SOURCE)
    assert "z = y + 1" not in student and "return 2 * x" not in student and "x + 2" not in student
    assert 'raise NotImplementedError("Exercise 9.1: add two to x")' in student
    assert "# BEGIN EXERCISE 9.1" in student and "# END EXERCISE" in student
    padded = strip_solutions(SOURCE, keep_lines=True)
    assert padded.count("\n") == SOURCE.count("\n") and "z = y + 1" not in padded
    namespace = run_ns(student)
    for name in ("f", "f_torch"):  # the twin borrows its exercise's description
        with pytest.raises(NotImplementedError, match="^Exercise 9.1: add two to x$"):
            namespace[name](1)


def test_stub_in_process_reaches_every_region_and_undoes_it(tmp_path, monkeypatch):
    """Each region of the exercise, the twins after the first one included (line numbers must
    not shift), and a function nested in another."""
    from minattn.tools.exercise_audit import stub_in_process

    pkg = tmp_path / "classroom_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    nested = "\n\ndef outer():\n    def inner(x):\n        # BEGIN EXERCISE 9.1\n        return x\n        # END EXERCISE\n    return inner\n"
    (pkg / "lib.py").write_text(SOURCE + nested)
    monkeypatch.syspath_prepend(tmp_path)
    from classroom_pkg import lib

    monkeypatch.setattr("minattn.tools.exercise_audit.all_exercises",
                        lambda root: find_exercises(SOURCE + nested, Path("classroom_pkg/lib.py")))
    restore = stub_in_process("9.1", tmp_path)
    for call in (lambda: lib.f(1), lambda: lib.f_torch(1), lambda: lib.outer()(1)):
        with pytest.raises(NotImplementedError, match="^Exercise 9.1: add two to x$"):
            call()
    assert lib.g(1) == 2
    restore()
    assert lib.f(1) == 3 and lib.f_torch(1) == 3 and lib.outer()(1) == 1


def test_strip_only_some_exercises_and_quotes_survive():
    namespace = run_ns(strip_solutions(SOURCE, only={"9.2"}))
    assert namespace["f"](1) == 3
    with pytest.raises(NotImplementedError, match="Exercise 9.2: double x"):
        namespace["g"](1)
    quoted = '''def h():\n    # BEGIN EXERCISE 9.3 predict: is "a\\\\b" 'odd'?\n    return 1\n    # END EXERCISE\n'''
    with pytest.raises(NotImplementedError, match="odd"):
        run_ns(strip_solutions(quoted))["h"]()


def test_unbalanced_markers_are_reported():
    with pytest.raises(ValueError, match="never closed"):
        find_exercises("# BEGIN EXERCISE 1.1 x\n")
    with pytest.raises(ValueError, match="without a BEGIN"):
        find_exercises("# END EXERCISE\n")


def test_ids_and_lessons_are_checked_and_unknown_ids_listed():
    known = ["1.1", "1.2", "2.1", "10.1"]
    assert expand_ids(["1"], known) == ["1.1", "1.2"]
    assert expand_ids(["2.1", "01"], known) == ["1.1", "1.2", "2.1"]
    with pytest.raises(ValueError, match=r"unknown exercise '9.9'; valid ids: 1.1 1.2 2.1 10.1"):
        expand_ids(["9.9"], known)


def test_list_shows_exercises_per_lesson_in_order(capsys):
    assert ex.main(["list"]) == 0
    out = capsys.readouterr().out
    lessons = [line for line in out.splitlines() if line and not line.startswith(" ")]
    assert lessons == sorted(lessons) and lessons
    for e in by_id(all_exercises()):
        assert f"  {e:6}" in out


# ============================================================================ student copies
def fake_course(root: Path) -> Path:
    """A tiny course: one library file with exercises, a visible and a hidden test."""
    (root / "minattn").mkdir(parents=True)
    (root / "minattn" / "__init__.py").write_text("")
    (root / "minattn" / "lib.py").write_text(SOURCE)
    (root / "tests" / "hidden").mkdir(parents=True)
    (root / "tests" / "test_lib.py").write_text("def test_f():\n    from minattn.lib import f\n    assert f(1) == 3\n")
    (root / "tests" / "hidden" / "test_hidden_lib.py").write_text("def test_g():\n    pass\n")
    (root / "README.md").write_text("course\n")
    return root


def tree(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_student_copy_refuses_what_it_did_not_make_and_checks_arguments_first(tmp_path):
    root = fake_course(tmp_path / "course")
    foreign = tmp_path / "teacher_files"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    before = tree(foreign)
    with pytest.raises(ValueError, match="not a student copy made by this tool"):
        make_student_copy(foreign, root)
    assert tree(foreign) == before
    with pytest.raises(ValueError, match=r"unknown exercise '9\.9'; valid ids: 9\.1 9\.2"):
        make_student_copy(tmp_path / "new", root, only=["9.9"])
    assert not (tmp_path / "new").exists()  # nothing written
    with pytest.raises(ValueError, match="inside the repository must be ./student"):
        make_student_copy(root / "elsewhere", root)
    with pytest.raises(ValueError, match="holds the course itself"):
        make_student_copy(tmp_path, root)
    assert ex.main(["student", str(foreign)]) == 2  # the command line says so, no traceback


def test_student_copy_drops_hidden_tests_and_rebuilds_only_with_force(tmp_path):
    root = fake_course(tmp_path / "course")
    dest = tmp_path / "student"
    removed = make_student_copy(dest, root, only=["9"])
    assert {e.id for e in removed} == {"9.1", "9.2"}
    assert not (dest / "tests" / "hidden").exists() and (dest / "tests" / "test_lib.py").exists()
    manifest = json.loads((dest / ".student-copy").read_text())
    assert set(manifest["files"]) == {"minattn/__init__.py", "minattn/lib.py", "tests/test_lib.py", "README.md"}
    assert manifest["exercises"] == ["9.1", "9.2"]

    # The student works: edits the library, adds a file.
    solved = (dest / "minattn" / "lib.py").read_text().replace(
        'raise NotImplementedError("Exercise 9.2: double x")', "return x + x")
    (dest / "minattn" / "lib.py").write_text(solved)
    (dest / "my_notes.py").write_text("ideas")
    with pytest.raises(ValueError, match="already holds a student copy.*--force"):
        make_student_copy(dest, root, only=["9.1"])
    assert (dest / "minattn" / "lib.py").read_text() == solved

    make_student_copy(dest, root, only=["9.1"], force=True)
    assert (dest / "my_notes.py").read_text() == "ideas"  # not the tool's: never touched
    (backup,) = dest.glob(".student-backup-*")
    assert (backup / "minattn" / "lib.py").read_text() == solved  # edited: kept aside
    assert "return 2 * x" in (dest / "minattn" / "lib.py").read_text()  # 9.2 not handed out now
    assert json.loads((dest / ".student-copy").read_text())["exercises"] == ["9.1"]


def test_student_copy_of_a_git_checkout_leaves_the_teachers_other_files_out(tmp_path):
    root = fake_course(tmp_path / "course")
    git = ["git", "-c", "user.email=t@example.org", "-c", "user.name=t"]
    subprocess.run(git + ["init", "-q"], cwd=root, check=True)
    subprocess.run(git + ["add", "."], cwd=root, check=True)
    subprocess.run(git + ["commit", "-qm", "course"], cwd=root, check=True)
    (root / "grades.csv").write_text("alice,1.1,4,4\n")
    (root / "submissions" / "alice" / "minattn").mkdir(parents=True)
    (root / "submissions" / "alice" / "minattn" / "lib.py").write_text(SOURCE)
    (root / "minattn" / "new.py").write_text("x = 1\n")  # new course file, not committed yet
    make_student_copy(tmp_path / "student", root)
    files = set(json.loads((tmp_path / "student" / ".student-copy").read_text())["files"])
    assert files == {"minattn/__init__.py", "minattn/lib.py", "minattn/new.py", "tests/test_lib.py", "README.md"}


def test_splice_takes_region_bodies_only(tmp_path):
    teacher = SOURCE
    theirs = strip_solutions(SOURCE).replace(
        'raise NotImplementedError("Exercise 9.1: add two to x")', "return x + 2", 1)
    theirs = "import os  # outside any region: ignored\n" + theirs
    text, notes = splice(teacher, theirs, {"9.1"}, {})
    assert "import os" not in text and notes == []
    namespace = run_ns(text)
    assert namespace["f"](1) == 3 and namespace["g"](1) == 2  # 9.2 keeps the teacher's body
    with pytest.raises(NotImplementedError, match="Exercise 9.1"):  # f_torch: still the stub
        namespace["f_torch"](1)
    text, notes = splice(teacher, None, {"9.2"}, {"9.2": "double x"})
    assert notes == ["region 9.2 #1 missing in the submission"]
    with pytest.raises(NotImplementedError, match="Exercise 9.2: double x"):
        run_ns(text)["g"](1)

    # A graded copy has the teacher's tests (hidden ones too), whatever the submission holds.
    root = fake_course(tmp_path / "course")
    sub = tmp_path / "sub"
    make_student_copy(sub, root)
    (sub / "tests" / "test_lib.py").write_text("def test_f():\n    pass\n")
    graded = tmp_path / "graded"
    grading.build_graded_copy(sub, graded, ["9.1", "9.2"], root)
    assert (graded / "tests" / "test_lib.py").read_text() == (root / "tests" / "test_lib.py").read_text()
    assert (graded / "tests" / "hidden" / "test_hidden_lib.py").exists()


# ============================================================================ give-aways
TWINS = '''import numpy as np


def soft_np(x):
    # BEGIN EXERCISE 9.1 softmax
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
    # END EXERCISE


def soft_torch(x):
    return x.softmax(-1)


def helper(x):
    x = x * 1.0
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def unmarked(x):
    return np.exp(x) / np.exp(x).sum(-1, keepdims=True)


def fine(x):
    # not a twin of exercise 9.1: calls the exercise, gives nothing away
    return soft_np(x)
'''


def test_giveaways_are_found_generically(tmp_path):
    (tmp_path / "minattn").mkdir()
    (tmp_path / "minattn" / "__init__.py").write_text("")
    (tmp_path / "minattn" / "m.py").write_text(TWINS)
    problems = find_giveaways(tmp_path, twins=[("soft_np", "fine"), ("soft_np", "gone"),
                                               ("soft_np", "unmarked")])
    text = "\n".join(problems)
    assert "soft_torch is a twin (same stem)" in text
    assert "helper repeats" in text  # the same lines under another name
    assert "fine" not in text and "gone" not in text  # waived by its comment; no longer there
    assert "unmarked gives soft_np's answer away" in text  # listed
    assert len(problems) == 3


def test_no_function_left_in_a_student_copy_gives_an_answer_away():
    problems = find_giveaways(REPO_ROOT)
    assert not problems, ("mark these with the exercise's id (or say why not with a comment "
                          "'# not a twin of exercise X.Y: why'):\n" + "\n".join(problems))


# ============================================================================ lessons
def test_an_unimplemented_exercise_is_one_line():
    def raise_it():
        raise NotImplementedError("Exercise 1.2: attention forward")
    try:
        raise_it()
    except NotImplementedError as err:
        line = ex.exercise_stop(err, err.__traceback__)
    assert line.startswith("Exercise 1.2 is not implemented yet (raise_it in tests/test_exercises.py:")
    assert line.endswith("make exercises EX=1.2") and "\n" not in line
    assert ex.exercise_stop(NotImplementedError("something else"), None) is None


# ============================================================================ the full student copy
def env_for(root, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update(PYTHONPATH=str(root), OMP_NUM_THREADS="1", MINATTN_SMOKE="1", MPLBACKEND="Agg", **extra)
    return env


@pytest.fixture(scope="module")
def student(tmp_path_factory):
    dest = tmp_path_factory.mktemp("classroom") / "student"
    make_student_copy(dest)
    return dest


@pytest.mark.slow
def test_student_check_prints_a_compact_table_last(student):
    proc = subprocess.run([sys.executable, "-m", "minattn.tools.exercises", "check"], cwd=student,
                          env=env_for(student), capture_output=True, text=True, timeout=600)
    out = proc.stdout
    assert proc.returncode == 1 and "Traceback" not in out + proc.stderr, out[-3000:]
    groups = by_id(all_exercises())
    lines = out.strip().splitlines()
    table = lines[-len(groups) - 3:-2]  # the table, then a blank line and the hint
    assert table[0].split() == ["exercise", "kind", "state", "tests", "message"], out[-3000:]
    for (ex_id, regions), line in zip(groups.items(), table[1:]):
        assert line.split()[:2] == [ex_id, ex.summary(regions).kind], line
        # every test fails, with NotImplementedError (or skips: no CUDA, no data)
        assert "not implemented yet" in line or "skipped" in line, line
    assert lines[-1].startswith("details (tracebacks): make exercises EX=")
    proc = subprocess.run([sys.executable, "-m", "minattn.tools.exercises", "check", "9.9"],
                          cwd=student, env=env_for(student), capture_output=True, text=True)
    assert proc.returncode == 2 and "valid ids: " + " ".join(groups) in proc.stderr


@pytest.mark.slow
def test_each_exercise_stubbed_alone_fails_its_own_tests(tmp_path):
    """In the teacher's copy, every exercise test (hidden ones too) run with only its own exercise
    stubbed out fails, and with that exercise's NotImplementedError: the tests depend on it."""
    rc, out, results, _ = ex._pytest(REPO_ROOT, ["tests", "-q", "--tb=no", "--stub-each", "--exercises"],
                                     tmp_path / "report.json", capture=True, timeout=600)
    found = results["exercises"]
    for ex_id in by_id(all_exercises()):
        counts = found.get(ex_id)
        assert counts and counts["tests"], f"no test is marked @pytest.mark.exercise({ex_id!r})"
        bad = {k: v for k, v in counts["failures"].items() if f"Exercise {ex_id}:" not in v}
        passing = [t for t in counts["tests"] if t not in counts["failures"] and t not in counts["skipped"]]
        assert counts["own_not_implemented"] == ex.n_run(counts), (
            f"exercise {ex_id}: these tests pass with it stubbed out, so they do not "
            f"check it (drop their exercise marker): {passing}; these fail otherwise: {bad}")


@pytest.mark.slow
def test_student_copy_lesson_stops_in_one_line_and_refuses_another_minattn(student, tmp_path):
    lesson = student / "lessons" / "01_attention.py"
    env = env_for(student, MINATTN_FIGURES=str(tmp_path))
    proc = subprocess.run([sys.executable, str(lesson)], cwd=student, env=env,
                          capture_output=True, text=True, timeout=300)
    last = proc.stderr.strip().splitlines()[-1]  # (progress bars may come before it)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert last.startswith("Exercise 1.") and " is not implemented yet (" in last, last
    assert re.search(r"in minattn/[\w/]+\.py:\d+\)", last) and "make exercises EX=1." in last, last

    # Run with the teacher's minattn on the path: refused, naming both copies.
    proc = subprocess.run([sys.executable, str(lesson)], cwd=student, env=env_for(REPO_ROOT),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"belongs to {student.resolve()}" in proc.stderr
    assert f"found {REPO_ROOT.resolve() / 'minattn'}" in proc.stderr


@pytest.mark.slow
def test_student_copy_imports_and_its_notebook_shows_the_stub_and_stops_in_one_line(student):
    nbclient = pytest.importorskip("nbclient")
    import nbformat

    modules = sorted(".".join(p.relative_to(student).with_suffix("").parts)
                     for p in (student / "minattn").rglob("*.py") if p.name != "__init__.py")
    cells = ["import importlib\nfor m in %r:\n    importlib.import_module(m)" % modules,"from minattn.tools.lesson import Lesson, show\nL = Lesson('00_check')",
             "from minattn.attention import softmax_np\nshow(softmax_np)",
             "import numpy as np\nsoftmax_np(np.zeros(3))"]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    old = {k: os.environ.get(k) for k in ("PYTHONPATH", "MINATTN_FIGURES")}
    os.environ.update(PYTHONPATH=str(student), MINATTN_FIGURES=str(student / "figures"))
    try:
        nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3", allow_errors=True,
                                resources={"metadata": {"path": str(student)}}).execute()
    finally:
        for key, value in old.items():
            os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)
    assert notebook.cells[0].outputs == [], notebook.cells[0].outputs  # the library imports
    shown = json.dumps(notebook.cells[2].outputs)
    assert "raise NotImplementedError" in shown and "row_max" not in shown
    (out,) = notebook.cells[3].outputs
    assert out.output_type == "stream" and out.name == "stderr", out
    assert out.text.strip().count("\n") == 0 and "make exercises EX=1.1" in out.text


# ============================================================================ grading
WRONG_SOFTMAX = '''    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    exp = np.exp(scores - scores.max())  # one max for the whole array: rows far below it underflow
    total = exp.sum(axis=-1, keepdims=True)
    return exp / np.where(total == 0.0, 1.0, total)
'''


@pytest.mark.slow
def test_grading_two_submissions_into_a_csv(tmp_path):
    """Hand out exercise 1.1; one student solves it, one uses a global max; the gradebook says so,
    counting the hidden tests; a student who edits the tests gains nothing."""
    teacher_text = (REPO_ROOT / "minattn" / "attention.py").read_text()
    (_, first, last), = [f for f in _functions(teacher_text) if f[0] == "softmax_np"]
    softmax_id = next(e.id for e in find_exercises(teacher_text) if first <= e.line <= last)
    hand_out = tmp_path / "handout"
    make_student_copy(hand_out, only=[softmax_id])
    good, bad = tmp_path / "alice", tmp_path / "bob"
    for sub in (good, bad):
        make_student_copy(sub, only=[softmax_id])
    (good / "minattn" / "attention.py").write_text(teacher_text)  # the right answer everywhere
    lines = teacher_text.splitlines(keepends=True)
    start = next(i for i, l in enumerate(lines) if l.lstrip().startswith("def softmax_np"))
    begin = next(i for i in range(start, len(lines)) if ex.BEGIN.match(lines[i]))
    end = next(i for i in range(begin, len(lines)) if ex.END.match(lines[i]))
    lines[begin + 1:end] = [WRONG_SOFTMAX]
    (bad / "minattn" / "attention.py").write_text("".join(lines))
    for test in (bad / "tests").glob("test_*.py"):  # bob also "fixes" the tests: ignored
        test.write_text("def test_nothing():\n    pass\n")

    out = tmp_path / "grades.csv"
    proc = subprocess.run([sys.executable, "-m", "minattn.tools.exercises", "grade", str(good), str(bad),
                           "--out", str(out), "--timeout", "300"], cwd=tmp_path,
                          env=env_for(REPO_ROOT), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = {r["submission"]: r for r in csv.DictReader(out.open())}
    assert set(rows) == {"alice", "bob"} and rows["alice"]["exercise"] == softmax_id
    marker = f'@pytest.mark.exercise("{softmax_id}")'
    visible = sum(p.read_text().count(marker) for p in (hand_out / "tests").glob("test_*.py"))
    assert not (hand_out / "tests" / "hidden").exists()
    # test_hidden_classroom.py adds 4 hidden tests of the softmax (more may come from others)
    assert int(rows["alice"]["total"]) >= visible + 4
    assert rows["alice"]["passed"] == rows["alice"]["total"] == rows["bob"]["total"]
    assert int(rows["bob"]["passed"]) < int(rows["bob"]["total"]) and rows["bob"]["first_failure"]
    assert "alice: 1/1 exercises pass" in proc.stdout and "bob: 0/1 exercises pass" in proc.stdout


@pytest.mark.slow
def test_grading_survives_a_submission_that_hangs(tmp_path):
    root = fake_course(tmp_path / "course")
    shutil.copytree(REPO_ROOT / "minattn" / "tools", root / "minattn" / "tools",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO_ROOT / "conftest.py", root / "conftest.py")
    shutil.copy(REPO_ROOT / "tests" / "conftest.py", root / "tests" / "conftest.py")
    (root / "tests" / "test_lib.py").write_text(
        "import pytest\n\n@pytest.mark.exercise('9.1')\ndef test_f():\n"
        "    from minattn.lib import f\n    assert f(1) == 3\n\n"
        "@pytest.mark.exercise('9.2')\ndef test_g():\n    from minattn.lib import g\n    assert g(2) == 4\n")
    (root / "tests" / "test_top.py").write_text(  # imports at the top: a broken file stops collection
        "import pytest\nfrom minattn.lib import g\n\n@pytest.mark.exercise('9.2')\n"
        "def test_g_again():\n    assert g(3) == 6\n")
    sub = tmp_path / "carol"
    make_student_copy(sub, root)
    text = (sub / "minattn" / "lib.py").read_text()
    text = text.replace('raise NotImplementedError("Exercise 9.1: add two to x")', "return x + 2", 1)
    text = text.replace('raise NotImplementedError("Exercise 9.1: add two to x")', "return x + 2", 1)
    text = text.replace('raise NotImplementedError("Exercise 9.2: double x")',
                        "while True:\n        pass")
    (sub / "minattn" / "lib.py").write_text(text)
    crash, broken = tmp_path / "dave", tmp_path / "erin"
    for other, body in ((crash, "import os\n    os._exit(3)"), (broken, "return x +")):
        make_student_copy(other, root)
        text = (other / "minattn" / "lib.py").read_text()
        (other / "minattn" / "lib.py").write_text(text.replace(
            'raise NotImplementedError("Exercise 9.1: add two to x")', body, 1))
    rows = grading.grade([sub, crash, broken], tmp_path / "g.csv", timeout=15, root=root)
    got = {(r["submission"], r["exercise"]): r for r in rows}
    assert got["carol", "9.1"]["passed"] == got["carol", "9.1"]["total"] == 1
    assert got["carol", "9.2"]["passed"] == 0 and got["carol", "9.2"]["total"] == 2
    assert "timed out after 15 s (in tests/test_lib.py::test_g)" in got["carol", "9.2"]["first_failure"]
    for ex_id in ("9.1", "9.2"):  # the process died in test_f: nothing after it ran
        assert got["dave", ex_id]["passed"] == 0
        assert got["dave", ex_id]["total"] == {"9.1": 1, "9.2": 2}[ex_id]
        assert "crashed (exit code 3) in tests/test_lib.py::test_f" in got["dave", ex_id]["first_failure"]
    for ex_id in ("9.1", "9.2"):  # a syntax error: every test of the file fails, collection goes on
        assert got["erin", ex_id]["passed"] == 0 and "SyntaxError" in got["erin", ex_id]["first_failure"]
    assert got["erin", "9.2"]["total"] == 2
    assert [r["submission"] for r in csv.DictReader((tmp_path / "g.csv").open())] == ["carol"] * 2 + ["dave"] * 2 + ["erin"] * 2
