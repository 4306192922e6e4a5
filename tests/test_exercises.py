"""The classroom machinery (minattn/course/classroom/, and the lessons' guard
minattn/course/checkout.py):
markers and stripping; student copies of tracked files that never destroy or move a file or a
solution they did not write; nothing in a copy giving an answer away; lessons that refuse
another checkout's minattn and stop in one line on an unimplemented exercise; the student's
check (time limit, Ctrl-C); grading what the teacher lists, under unique names, against
submissions that hang, crash or break their markers.

Fast tests use a small fake course in tmp_path. The slow ones share one full student copy. The
grader attacked by submissions that cheat or reach for other students' files is in
tests/hidden/test_hidden_classroom.py (building those attacks takes an answer)."""

import contextlib
import csv
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from minattn.course import REPO_ROOT
from minattn.course.checkout import exercise_stop
from minattn.course.classroom import grading
from minattn.course.classroom.audit import find_giveaways
from minattn.course.classroom.check import answer_form_problem, answer_problem, n_run, run_pytest
from minattn.course.classroom.cli import main
from minattn.course.classroom.copies import make_student_copy
from minattn.course.classroom.regions import (
    END,
    all_exercises,
    by_id,
    expand_ids,
    find_exercises,
    splice,
    strip_solutions,
    summary,
)
from minattn.course.classroom.sandbox import bwrap_problem, sandbox_problem

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
    from minattn.course.classroom.stubs import stub_in_process

    pkg = tmp_path / "classroom_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    nested = ("\n\ndef outer():\n    def inner(x):\n        # BEGIN EXERCISE 9.1\n"
              "        return x\n        # END EXERCISE\n    return inner\n")
    (pkg / "lib.py").write_text(SOURCE + nested)
    monkeypatch.syspath_prepend(tmp_path)
    from classroom_pkg import lib

    monkeypatch.setattr("minattn.course.classroom.stubs.all_exercises",
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
    quoted = ('''def h():\n    # BEGIN EXERCISE 9.3 predict: is "a\\\\b" 'odd'?\n'''
              '''    return 1\n    # END EXERCISE\n''')
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
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    lessons = [line for line in out.splitlines() if line and not line.startswith(" ")]
    assert lessons == sorted(lessons) and lessons
    for e in by_id(all_exercises()):
        assert f"  {e:6}" in out


def _answers():
    """One case per function that holds a predict or experiment answer, marked with its id."""
    from minattn.course.classroom.stubs import holders

    return [pytest.param(ex_id, module, name, id=f"{ex_id}-{name}",
                         marks=pytest.mark.exercise(ex_id))
            for ex_id, regions in by_id(all_exercises()).items() if regions[0].kind != "implement"
            for module, name in holders({ex_id}, REPO_ROOT)]


@pytest.mark.parametrize("ex_id, module, name", _answers())
def test_each_answer_is_there_and_well_formed(ex_id, module, name, answer):
    """All that a visible test may say of a predict or experiment answer: it is given, in the
    form the question asks (its return annotation; one of CHOICES where the module lists them).
    Its value is checked by tests/hidden/ only (`make exercises` says "answered"). A wrong form
    once read `AssertionError: assert (False)`: the failure names the exercise, what the
    question asks for and what the function returned."""
    from minattn.course.classroom.stubs import resolve

    fn = resolve(module, name)
    problem = answer_problem(ex_id, fn, answer(fn))
    if problem:
        pytest.fail(problem, pytrace=False)


def test_a_wrongly_formed_answer_says_what_the_question_asks_for():
    assert answer_form_problem("1.4", "weight", "float", "0.57") == (
        "exercise 1.4: weight() returned '0.57'; it should return a number (a float, e.g. 0.25)")
    assert "2.0; it should return a whole number" in answer_form_problem("4.3", "f", "int", 2.0)
    assert "returned 'end'; it should return one of 'before', 'at', 'after'" in \
        answer_form_problem("8.3", "leader", "str", "end", ("before", "at", "after"))
    assert "it should return a set of names" in answer_form_problem("6.3", "f", "set[str]", ["a"])
    assert answer_form_problem("1.4", "weight", "float", 0.57) is None
    assert answer_form_problem("6.3", "f", "set[str]", {"a"}) is None


# ============================================================================ student copies
def fake_course(root: Path) -> Path:
    """A tiny course: one library file with exercises, a visible and a hidden test."""
    (root / "minattn").mkdir(parents=True)
    (root / "minattn" / "__init__.py").write_text("")
    (root / "minattn" / "lib.py").write_text(SOURCE)
    (root / "tests" / "hidden").mkdir(parents=True)
    (root / "tests" / "test_lib.py").write_text(
        "def test_f():\n    from minattn.lib import f\n    assert f(1) == 3\n")
    (root / "tests" / "hidden" / "test_hidden_lib.py").write_text("def test_g():\n    pass\n")
    (root / "README.md").write_text("course\n")
    return root


def tree(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


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
    assert main(["student", str(foreign)]) == 2  # the command line says so, no traceback


def solve(dest: Path, ex_id: str, answer: str) -> str:
    """A student's answer to an exercise of the fake course: the first stub replaced."""
    path = dest / "minattn" / "lib.py"
    what = {"9.1": "add two to x", "9.2": "double x"}[ex_id]
    stub = f'raise NotImplementedError("Exercise {ex_id}: {what}")'
    text = path.read_text().replace(stub, answer, 1)
    path.write_text(text)
    return text


def test_student_copy_drops_hidden_tests_and_rebuilds_only_with_force(tmp_path):
    root = fake_course(tmp_path / "course")
    dest = tmp_path / "student"
    removed = make_student_copy(dest, root, only=["9"])
    assert {e.id for e in removed} == {"9.1", "9.2"}
    assert not (dest / "tests" / "hidden").exists() and (dest / "tests" / "test_lib.py").exists()
    manifest = json.loads((dest / ".student-copy").read_text())
    assert set(manifest["files"]) == {"minattn/__init__.py", "minattn/lib.py",
                                      "tests/test_lib.py", "README.md", "COURSE.md"}
    assert manifest["exercises"] == ["9.1", "9.2"]

    # The student works: solves 9.1 and 9.2, edits outside the regions, adds a file.
    solve(dest, "9.1", "return x + 2")
    solved = solve(dest, "9.2", "return x + x").replace("def g(x):", "def g(x):  # mine")
    (dest / "minattn" / "lib.py").write_text(solved)
    (dest / "my_notes.py").write_text("ideas")
    with pytest.raises(ValueError, match="already holds a student copy.*--force"):
        make_student_copy(dest, root, only=["9.1"])
    assert (dest / "minattn" / "lib.py").read_text() == solved

    # Rebuilt with 9.1 only: the student's 9.1 stays in place, 9.2 is the teacher's now,
    # and the edited file is also copied aside (with the edit outside the regions).
    make_student_copy(dest, root, only=["9.1"], force=True)
    assert (dest / "my_notes.py").read_text() == "ideas"  # not the tool's: never touched
    text = (dest / "minattn" / "lib.py").read_text()
    assert "return x + 2" in text and "return 2 * x" in text and "# mine" not in text
    (backup,) = dest.glob(".student-backup-*")
    assert (backup / "minattn" / "lib.py").read_text() == solved
    assert json.loads((dest / ".student-copy").read_text())["exercises"] == ["9.1"]

    # Again in the same second: the kept work is still the student's (not the tool's file),
    # and a second backup folder, not the first one overwritten.
    make_student_copy(dest, root, only=["9.1"], force=True)
    assert "return x + 2" in (dest / "minattn" / "lib.py").read_text()
    make_student_copy(dest, root, only=["9.1"], force=True, reset=True)  # asked: stubs again
    assert "return x + 2" not in (dest / "minattn" / "lib.py").read_text()
    backups = sorted(dest.glob(".student-backup-*"))
    assert len(backups) == 3 and (backups[0] / "minattn" / "lib.py").read_text() == solved


def test_a_student_copy_has_a_readme_of_its_own(tmp_path):
    """Copies once shipped the teacher's README (grading, hand-outs) as the student's."""
    root = fake_course(tmp_path / "course")
    (root / "minattn" / "lib.py").write_text("# moved down by a line\n" + SOURCE)
    make_student_copy(tmp_path / "student", root, only=["9.2"])
    readme = (tmp_path / "student" / "README.md").read_text()
    assert (tmp_path / "student" / "COURSE.md").read_text() == "course\n"
    assert "took out the solutions of 1 exercise." in readme and "| 9.1 |" not in readme
    line = int(re.search(r"\| 9\.2 \| lesson 9 \| implement \|  \| double x \| "
                         r"`minattn/lib\.py:(\d+)` \|", readme)[1])
    student_lines = (tmp_path / "student" / "minattn" / "lib.py").read_text().splitlines()
    assert student_lines[line - 1].strip() == "# BEGIN EXERCISE 9.2 double x"
    for command in ("make setup", "make exercises EX=1.1", "make exercises EX=1.1 TB=1",
                    "## Asking for a check", "## Handing in", "between the markers"):
        assert command in readme, command
    assert not any(teacher in readme for teacher in ("classroom grade", "--only", "make student"))


def test_a_manifest_that_reaches_outside_the_copy_is_refused(tmp_path):
    root = fake_course(tmp_path / "course")
    dest = tmp_path / "student"
    make_student_copy(dest, root)
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me")
    manifest = json.loads((dest / ".student-copy").read_text())
    good = dict(manifest["files"])
    for bad in ({"../precious.txt": "0" * 64}, {str(precious): "0" * 64},
                {"minattn/../../precious.txt": "0" * 64}, {".git/config": "0" * 64},
                {"README.md": "not a checksum"}):
        (dest / ".student-copy").write_text(json.dumps(dict(manifest, files={**good, **bad})))
        before = tree(dest)
        with pytest.raises(ValueError, match="cannot be trusted"):
            make_student_copy(dest, root, force=True)
        assert precious.read_text() == "keep me" and tree(dest) == before
    (dest / ".student-copy").write_text(json.dumps(manifest))
    (dest / "minattn" / "lib.py").unlink()
    (dest / "minattn" / "lib.py").symlink_to(precious)  # a link where the tool writes: moved aside
    make_student_copy(dest, root, force=True)
    assert precious.read_text() == "keep me" and not (dest / "minattn" / "lib.py").is_symlink()


def test_student_copy_of_a_git_checkout_has_only_tracked_files(tmp_path, capsys):
    root = fake_course(tmp_path / "course")
    git = ["git", "-c", "user.email=t@example.org", "-c", "user.name=t"]
    subprocess.run(git + ["init", "-q"], cwd=root, check=True)
    subprocess.run(git + ["add", "."], cwd=root, check=True)
    subprocess.run(git + ["commit", "-qm", "course"], cwd=root, check=True)
    (root / "grades.csv").write_text("alice,1.1,4,4\n")
    (root / "submissions" / "alice" / "minattn").mkdir(parents=True)
    (root / "submissions" / "alice" / "minattn" / "lib.py").write_text(SOURCE)
    (root / "minattn" / "answer_key.py").write_text("ANSWERS = {}\n")  # never committed
    (root / "tests" / "hidden_2024").mkdir()
    (root / "tests" / "hidden_2024" / "test_old.py").write_text("def test_old():\n    pass\n")
    make_student_copy(tmp_path / "student", root)
    files = set(json.loads((tmp_path / "student" / ".student-copy").read_text())["files"])
    assert files == {"minattn/__init__.py", "minattn/lib.py", "tests/test_lib.py", "README.md",
                     "COURSE.md"}
    out = capsys.readouterr().out
    assert "left out of the copy: minattn/answer_key.py tests/hidden_2024/test_old.py" in out


def test_splice_takes_region_bodies_only_and_names_broken_markers(tmp_path):
    teacher = SOURCE
    theirs = strip_solutions(SOURCE).replace(
        'raise NotImplementedError("Exercise 9.1: add two to x")', "return x + 2", 1)
    theirs = "import os  # outside any region: ignored\n" + theirs
    text, notes = splice(teacher, theirs, {"9.1"}, {})
    assert "import os" not in text and notes == {}
    namespace = run_ns(text)
    assert namespace["f"](1) == 3 and namespace["g"](1) == 2  # 9.2 keeps the teacher's body
    with pytest.raises(NotImplementedError, match="Exercise 9.1"):  # f_torch: still the stub
        namespace["f_torch"](1)
    text, notes = splice(teacher, None, {"9.2"}, {"9.2": "double x"}, "minattn/lib.py")
    assert notes == {"9.2": ["exercise 9.2: minattn/lib.py missing in the submission"]}
    with pytest.raises(NotImplementedError, match="Exercise 9.2: double x"):
        run_ns(text)["g"](1)

    # An END marker deleted in 9.1's first region: that region is a stub and the note says
    # where; the other regions (9.1's twin, 9.2) are still the student's.
    lines = theirs.replace('raise NotImplementedError("Exercise 9.2: double x")',
                           "return x * 2").splitlines(keepends=True)
    first_end = next(i for i, line in enumerate(lines) if END.match(line))
    del lines[first_end]
    text, notes = splice(teacher, "".join(lines), {"9.1", "9.2"}, {}, "minattn/lib.py")
    assert notes == {"9.1": ["exercise 9.1: END marker missing in minattn/lib.py (BEGIN at line 5; "
                             "the next marker is exercise 9.1's BEGIN at line 10)"]}
    namespace = run_ns(text)
    with pytest.raises(NotImplementedError, match="Exercise 9.1"):
        namespace["f"](1)
    assert namespace["g"](3) == 6 and "return x * 2" in text
    text, notes = splice(teacher, SOURCE.replace("# BEGIN EXERCISE 9.2 double x", "# BEGIN 9.2"),
                         {"9.2"}, {}, "minattn/lib.py")
    assert notes == {"9.2": ["exercise 9.2: BEGIN marker missing in minattn/lib.py"]}


def test_a_graded_copy_holds_the_library_only_with_the_submissions_regions(tmp_path):
    root = fake_course(tmp_path / "course")
    sub = tmp_path / "sub"
    make_student_copy(sub, root)
    solve(sub, "9.2", "return x + x")
    (sub / "tests" / "test_lib.py").write_text("def test_f():\n    pass\n")
    (sub / "minattn" / "extra.py").write_text("print('mine')\n")
    graded = tmp_path / "graded"
    notes = grading.build_graded_copy(sub, graded, ["9.2"], root)
    assert notes == {} and set(tree(graded)) == {"minattn/__init__.py", "minattn/lib.py"}
    namespace = run_ns((graded / "minattn" / "lib.py").read_text())
    assert namespace["g"](3) == 6 and namespace["f"](1) == 3  # 9.1 not graded: the teacher's

    # A submission whose library is a link to the teacher's: read as missing, never followed.
    linked = tmp_path / "linked"
    make_student_copy(linked, root)
    shutil.rmtree(linked / "minattn")
    (linked / "minattn").symlink_to(root / "minattn")
    notes = grading.build_graded_copy(linked, tmp_path / "graded2", ["9.2"], root)
    assert notes == {"9.2": ["exercise 9.2: minattn/lib.py missing in the submission"]}
    with pytest.raises(NotImplementedError):
        run_ns((tmp_path / "graded2" / "minattn" / "lib.py").read_text())["g"](3)
    with pytest.raises(ValueError, match="the teacher's checkout"):
        grading.grade([root], None, only=["9.2"], root=root)


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


LESSON = """# %%
import numpy as np

from minattn.m import soft_np

x = np.array([1.0, 2.0])
# BEGIN EXERCISE 9.1 shown: p = soft_np(x)
e = np.exp(x - x.max(axis=-1, keepdims=True))
p = e / e.sum(axis=-1, keepdims=True)
# END EXERCISE
assert np.allclose(p, soft_np(x))
"""


def test_a_lesson_shows_an_exercises_lines_that_a_copy_replaces_by_its_function(tmp_path):
    """Issue 38 puts a mechanism's core lines in the lesson's cell; where they are an
    exercise's, they are a *shown* region: the teacher's lesson (and its pages) show them, a
    student copy handing the exercise out holds the library call in their place, and the audit
    reads the lesson as that copy has it."""
    from minattn.course.classroom.audit import find_copied_lines
    from minattn.course.classroom.regions import strip_shown

    student = strip_shown(LESSON, {"9.1"})
    assert "np.exp" not in student and "p = soft_np(x)\n" in student
    assert "Exercise 9.1: these lines are yours" in student
    assert strip_shown(LESSON, {"9.2"}) == LESSON
    root = fake_course(tmp_path / "course")
    (root / "minattn" / "m.py").write_text(
        "import numpy as np\n\n\ndef soft_np(x):\n    # BEGIN EXERCISE 9.1 softmax\n"
        "    e = np.exp(x - x.max(axis=-1, keepdims=True))\n"
        "    p = e / e.sum(axis=-1, keepdims=True)\n    return p\n    # END EXERCISE\n")
    (root / "lessons").mkdir()
    (root / "lessons" / "01_m.py").write_text(LESSON)
    assert not [p for p in find_copied_lines(root) if "lessons/" in p]
    (root / "lessons" / "01_m.py").write_text(LESSON.replace("# BEGIN EXERCISE 9.1 shown: p = "
                                                             "soft_np(x)\n", "").replace(
        "# END EXERCISE\n", ""))
    assert [p for p in find_copied_lines(root) if "lessons/01_m.py repeats" in p]
    (root / "lessons" / "01_m.py").write_text(LESSON)
    make_student_copy(tmp_path / "copy", root, only=["9.1"])
    copied = (tmp_path / "copy" / "lessons" / "01_m.py").read_text()
    assert copied == student
    make_student_copy(tmp_path / "copy2", root, only=["9.2"])
    assert (tmp_path / "copy2" / "lessons" / "01_m.py").read_text() == LESSON


def test_the_audit_finds_answers_outside_the_library(tmp_path):
    from minattn.course.classroom.audit import audit, find_helper_twins

    root = fake_course(tmp_path / "course")
    (root / "minattn" / "m.py").write_text(
        TWINS.replace("def soft_torch(x):\n    return x.softmax(-1)\n", ""))
    (root / "minattn" / "answers.py").write_text(
        "def weight():\n    # BEGIN EXERCISE 9.3 predict: a weight\n    return 12 / 7\n"
        "    # END EXERCISE\n")
    (root / "tests" / "test_m.py").write_text(
        "import numpy as np\nimport pytest\n\n\ndef expected(x):\n"
        "    e = np.exp(x - x.max(axis=-1, keepdims=True))\n"
        "    return e / e.sum(axis=-1, keepdims=True)\n\n\n"
        "@pytest.mark.exercise('9.3')\ndef test_weight():\n"
        "    from minattn.course.answers import weight\n"
        "    assert weight() > 1  # it is 1.714\n")
    (root / "tests" / "hidden_2024").mkdir()
    (root / "tests" / "hidden_2024" / "test_old.py").write_text("def test_old():\n    pass\n")
    text = "\n".join(audit(root))
    assert ("exercise 9.1: tests/test_m.py repeats 2 of the 2 lines of its region "
            "minattn/m.py:5") in text
    assert "exercise 9.3: tests/test_m.py:10 checks the value of a predict exercise" in text
    assert "exercise 9.3: tests/test_m.py:13 writes its answer (1.7142857142857142)" in text
    assert "tests/hidden_2024/test_old.py: teacher-only tests outside tests/hidden/" in text
    assert ("exercise 9.1: tests/test_m.py:7 computes what its region minattn/m.py:5 "
            "returns") in text
    assert len(text.splitlines()) == 6, text  # and the library's own twin (find_giveaways)

    # A test helper that computes a mask exercise's answer; one that calls the exercise is fine.
    (tmp_path / "test_helpers.py").write_text(
        "import numpy as np\nfrom minattn.sparse import sliding_window_mask_np\n\n\n"
        "def by_hand(n, w):\n"
        "    return np.array([[abs(i - j) <= w for j in range(n)] for i in range(n)])\n\n\n"
        "def by_the_library(n, w):\n    return sliding_window_mask_np(n, w)\n")
    found = find_helper_twins(REPO_ROOT, files=[tmp_path / "test_helpers.py"])
    assert len(found) == 1
    assert "test_helpers.py::by_hand computes what sliding_window_mask_np does" in found[0]


MASKED_MEAN = (
    "import numpy as np\n\n\ndef pool_np(states, mask):\n"
    "    # BEGIN EXERCISE 9.5 implement: masked mean\n"
    "    real = mask[..., None]\n"
    "    total = np.where(real, states, 0.0).sum(axis=1)\n"
    "    return total / real.sum(axis=1).astype(states.dtype)\n"
    "    # END EXERCISE\n")


@pytest.mark.parametrize("lesson, flagged", [
    # the answer under other names, across two lines, with the cast left out
    ("import numpy as np\nh = np.ones((2, 3, 4))\nkeep = np.ones((2, 3), bool)\n"
     "sel = keep[..., None]\nz = np.where(sel, h, 0).sum(axis=1) / sel.sum(axis=1)\n", 5),
    # inside a print, in a function of the lesson, torch's spelling
    ("import torch\n\n\ndef pooled(a, m):\n"
     "    print(torch.where(m[..., None], a, 0.0).sum(dim=1) / m[..., None].sum(dim=1))\n", 5),
    # what is not the answer: the library's call, a mean over every token, the sum alone,
    # a count of other tokens than the ones summed
    ("import numpy as np\nimport minattn.m as mm\nh = np.ones((2, 3, 4))\n"
     "keep = np.ones((2, 3), bool)\nz = mm.pool_np(h, keep)\nw = h.mean(axis=1)\n"
     "s = np.where(keep[..., None], h, 0.0).sum(axis=1)\n"
     "t = np.where(keep[..., None], h, 0.0).sum(axis=1) / (~keep)[..., None].sum(axis=1)\n",
     None),
])
def test_the_audit_finds_a_lesson_that_computes_an_answer(tmp_path, lesson, flagged):
    """Lesson 07 once computed exercise 7.1's masked mean in a cell (issue 45): the audit
    matches what a region returns against every expression of a lesson or visible test."""
    from minattn.course.classroom.audit import audit, find_computed_answers

    root = fake_course(tmp_path / "course")
    (root / "minattn" / "m.py").write_text(MASKED_MEAN)
    (root / "lessons").mkdir()
    (root / "lessons" / "01_m.py").write_text(lesson)
    found = find_computed_answers(root)
    if flagged is None:
        assert found == []
    else:
        assert found == [f"exercise 9.5: lessons/01_m.py:{flagged} computes what its region "
                         "minattn/m.py:5 returns: call the library or mark the lines as a "
                         "shown region"]
        assert found[0] in audit(root)
        if "z = np.where" in lesson:  # the same lines as a shown region: a copy calls the library
            shown = lesson.replace("z = np.where", "# BEGIN EXERCISE 9.5 shown: z = "
                                   "mm.pool_np(h, keep)\nz = np.where") + "# END EXERCISE\n"
            (root / "lessons" / "01_m.py").write_text(shown)
            assert find_computed_answers(root) == []


def test_the_class_pages_leave_out_a_cell_that_answers_an_experiment():
    """Experiment 4.4's answer is two rows of a table lesson 04 prints (issue 45): its cell
    says `# EXERCISE 4.4 answered here`, and the class's pages drop its output; the lesson
    itself (a student's run) still prints it."""
    import nbformat

    from minattn.course.pages import class_notebook

    answer = nbformat.v4.new_code_cell("# EXERCISE 4.4 answered here: the table\nprint(2.545)")
    answer.outputs = [nbformat.v4.new_output("stream", name="stdout", text="2.545\n")]
    other = nbformat.v4.new_code_cell("print(1)")
    other.outputs = [nbformat.v4.new_output("stream", name="stdout", text="1\n")]
    notebook = nbformat.v4.new_notebook(cells=[answer, other])
    assert class_notebook(notebook) == 1
    assert "2.545" not in answer.outputs[0].text
    assert "answers exercise 4.4; run the lesson" in answer.outputs[0].text
    assert other.outputs[0].text == "1\n"
    lesson = (REPO_ROOT / "lessons" / "04_xl.py").read_text()
    assert "# EXERCISE 4.4 answered here" in lesson.split('"XL", ALONE')[0].rsplit("# %%", 1)[1]


def test_nothing_in_a_student_copy_gives_an_answer_away():
    from minattn.course.classroom.audit import audit

    problems = audit(REPO_ROOT)
    assert not problems, ("mark twins with the exercise's id (or say why not with a comment "
                          "'# not a twin of exercise X.Y: why'), move answer checks and "
                          "helpers to tests/hidden/:\n" + "\n".join(problems))


def region_shapes(root: Path = REPO_ROOT) -> dict[str, dict[str, list[str]]]:
    """exercise id -> {function stem (softmax for softmax_np and softmax_torch): the shape of
    each of its regions, "returns" (the region's last statement is the function's return) or
    "sets names" (the lines after the region finish the function)}."""
    import ast

    shapes: dict[str, dict[str, list[str]]] = {}
    for e in all_exercises(root):
        tree = ast.parse((root / e.path).read_text())
        function = max((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
                        and n.lineno < e.line < n.end_lineno), key=lambda n: n.lineno)
        inside = [n for n in ast.walk(function) if isinstance(n, ast.stmt)
                  and e.line < n.lineno < e.end and n is not function]
        last = max(inside, key=lambda n: n.lineno, default=None)
        shape = "returns" if isinstance(last, ast.Return) else "sets names"
        stem = re.sub(r"_(np|torch)$", "", function.name)
        shapes.setdefault(e.id, {}).setdefault(stem, []).append(f"{shape} ({e.path}:{e.line})")
    return shapes


def test_twins_of_an_exercise_have_one_region_shape():
    """attention_np's region once assigned output and weights (its return came after END)
    while attention_torch's returned them: a student who wrote the second like the first got
    `TypeError: cannot unpack non-iterable NoneType`."""
    mixed = {f"{ex_id} {stem}": found for ex_id, stems in region_shapes().items()
             for stem, found in stems.items()
             if len({s.split(" (")[0] for s in found}) > 1}
    assert not mixed, mixed


def test_a_stub_gives_the_lines_after_it_the_names_they_read():
    """A region whose outputs the lines after END read gets a placeholder in a copy, so that
    `ruff check` (F821) passes there; one that returns needs none; long stubs wrap at 100."""
    text = ("def f(x):\n    y = x\n    # BEGIN EXERCISE 9.1 implement: " + "word " * 30 + "\n"
            "    z, q = y, 1\n    # END EXERCISE\n    return q + z\n\n\ndef g(x):\n"
            "    # BEGIN EXERCISE 9.2 double x\n    t = 2 * x\n    return t\n"
            "    # END EXERCISE\n")
    student = strip_solutions(text)
    assert "    q = z = None\n" in student and "t = None" not in student
    assert all(len(line) <= 100 for line in student.splitlines() if "BEGIN" not in line)
    with pytest.raises(NotImplementedError, match="^Exercise 9.1: (word ){29}word$"):
        run_ns(student)["f"](1)
    assert strip_solutions(text, keep_lines=True).count("\n") == text.count("\n")


# ============================================================================ lessons
def test_an_unimplemented_exercise_is_one_line():
    def raise_it():
        raise NotImplementedError("Exercise 1.2: attention forward")
    try:
        raise_it()
    except NotImplementedError as err:
        line = exercise_stop(err, err.__traceback__)
    assert line.startswith(
        "Exercise 1.2 is not implemented yet (raise_it in tests/test_exercises.py:")
    assert line.endswith("make exercises EX=1.2") and "\n" not in line
    assert exercise_stop(NotImplementedError("something else"), None) is None


# ============================================================================ the full student copy
def env_for(root, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update(PYTHONPATH=str(root), OMP_NUM_THREADS="1", MINATTN_SMOKE="1", MPLBACKEND="Agg",
               **extra)
    return env


@pytest.fixture(scope="module")
def student(tmp_path_factory):
    dest = tmp_path_factory.mktemp("classroom") / "student"
    make_student_copy(dest)
    return dest


def test_a_fresh_student_copy_passes_the_projects_lint(student):
    """`make test` in a copy starts with `ruff check .`: undefined names after a stub (F821),
    values only a stripped region read (F841), stubs past 100 columns (E501) once stopped it
    before pytest."""
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache",
                           "--output-format", "concise", "."], cwd=student,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


@pytest.fixture(scope="module")
def student_check(student, tmp_path_factory):
    """The student's check, run once in the full copy (every exercise handed out, so every one
    stubbed): its exit code, what it printed, and the report of the pytest run under it."""
    from minattn.course.classroom.check import check

    report = tmp_path_factory.mktemp("student-check") / "report.json"
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(io.StringIO()) as out:
        for key, value in env_for(student).items():
            patch.setenv(key, value)
        rc = check(root=student, report=report)
    return rc, out.getvalue(), json.loads(report.read_text())


@pytest.mark.slow
def test_student_check_prints_a_compact_table_last(student, student_check):
    rc, out, _ = student_check
    assert rc == 1 and "Traceback" not in out, out[-3000:]
    groups = by_id(all_exercises())
    lines = out.strip().splitlines()
    assert len(lines) == len(groups) + 3, out  # the table alone, and the hint under it
    table = lines[-len(groups) - 3:-2]  # the table, then a blank line and the hint
    assert table[0].split() == ["exercise", "kind", "state", "tests", "message"], out[-3000:]
    for (ex_id, regions), line in zip(groups.items(), table[1:]):
        assert line.split()[:2] == [ex_id, summary(regions).kind], line
        # every test fails, with NotImplementedError (or skips: no CUDA, no data)
        assert "not implemented yet" in line or "skipped" in line, line
    assert lines[-1].startswith("details (tracebacks): make exercises EX=")
    proc = subprocess.run([sys.executable, "-m", "minattn.course.classroom", "check", "9.9"],
                          cwd=student, env=env_for(student), capture_output=True, text=True)
    assert proc.returncode == 2 and "valid ids: " + " ".join(groups) in proc.stderr


@pytest.mark.slow
def test_every_single_exercise_copy_passes_lint_and_its_tests_collect_and_run(student_check,
                                                                             tmp_path):
    """A copy that hands out exercise 1.1 alone once ran no test at all: tests/bad_calls.py
    called the stubbed softmax when tests/test_inputs.py imported it, and pytest stopped at
    collection (`make exercises` hid it: the check goes on past a file that does not import).

    Lint: a single-exercise copy differs from the course (which `make test` lints first) only
    in the files that hold the exercise's regions, stripped of that exercise alone, as
    make_student_copy strips them; those files are linted here, one folder per exercise, in
    one ruff call. Collection: a test module that reaches exercise X's code when it is
    imported runs, in the copy of every exercise, the same code up to the first stub it meets
    (X's own at the latest) and fails there too; so every test module importing without an
    error in the full copy means it imports in every single-exercise copy. The check's run
    in the full copy then runs every exercise's tests."""
    from minattn.course.classroom.regions import descriptions

    _, _, report = student_check
    assert report["errors"] == [], ("test modules that call an exercise's code when they are "
                                    "imported (a copy's pytest stops there; build such "
                                    f"fixtures without the exercise): {report['errors']}")
    for ex_id in by_id(all_exercises()):
        counts = report["exercises"].get(ex_id, {})
        ran = counts.get("passed", 0) + counts.get("failed", 0) + len(counts.get("skipped", []))
        assert counts.get("tests") and ran == len(counts["tests"]), (ex_id, counts)
    exercises = all_exercises()
    what = descriptions(exercises)
    from minattn.course.classroom.regions import strip_shown

    lessons = {p: p.read_text() for p in sorted((REPO_ROOT / "lessons").glob("*.py"))}
    for ex_id, regions in by_id(exercises).items():
        for rel in {str(r.path) for r in regions}:
            path = tmp_path / ex_id / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(strip_solutions((REPO_ROOT / rel).read_text(), {ex_id}, what))
        for lesson, text in lessons.items():  # a lesson's shown lines of the exercise
            if (stripped := strip_shown(text, {ex_id})) != text:
                (tmp_path / ex_id / "lessons").mkdir(exist_ok=True)
                (tmp_path / ex_id / "lessons" / lesson.name).write_text(stripped)
        shutil.copy(REPO_ROOT / "pyproject.toml", tmp_path / ex_id / "pyproject.toml")
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache",
                           "--output-format", "concise", "."], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


@pytest.fixture(scope="module")
def stub_each(tmp_path_factory):
    """The exercise report of one run of every exercise test with its own exercise stubbed."""
    report = tmp_path_factory.mktemp("stub-each") / "report.json"
    rc, out, results, _ = run_pytest(REPO_ROOT,
                                     ["tests", "-q", "--tb=no", "--stub-each", "--exercises"],
                                     report, capture=True, timeout=600)
    return results


@pytest.mark.slow
def test_each_exercise_stubbed_alone_fails_its_own_tests(stub_each):
    """In the teacher's copy, every exercise test (hidden ones too) run with only its own exercise
    stubbed out fails, and with that exercise's NotImplementedError: the tests depend on it."""
    found = stub_each["exercises"]
    for ex_id in by_id(all_exercises()):
        counts = found.get(ex_id)
        assert counts and counts["tests"], f"no test is marked @pytest.mark.exercise({ex_id!r})"
        bad = {k: v for k, v in counts["failures"].items() if f"Exercise {ex_id}:" not in v}
        passing = [t for t in counts["tests"]
                   if t not in counts["failures"] and t not in counts["skipped"]]
        assert counts["own_not_implemented"] == n_run(counts), (
            f"exercise {ex_id}: these tests pass with it stubbed out, so they do not "
            f"check it (drop their exercise marker): {passing}; these fail otherwise: {bad}")


@pytest.mark.slow
def test_every_region_a_copy_strips_is_reached_by_a_test_of_its_exercise(stub_each, tmp_path):
    """Handing out an exercise removes only code that its own tests run: otherwise `make
    exercises EX=<id>` says PASS while a lesson stops on the stripped code
    (minattn/course/classroom/reach.py: the regions the stub-each run reached first, then the
    others traced)."""
    from minattn.course.classroom.reach import unreached

    def run(args):
        return run_pytest(REPO_ROOT, ["-q", "--tb=no", *args], tmp_path / "traced.json",
                          capture=True, timeout=600)[2]
    problems = unreached(stub_each, run)
    assert not problems, "\n".join(problems)


def test_the_reach_check_finds_a_region_no_test_of_its_exercise_runs(tmp_path):
    """The block-sparse kernel's softmax once carried exercise 1.1's marker: `make exercises
    EX=1.1` said PASS while lesson 02 stopped on it."""
    from minattn.course.classroom.reach import unreached

    root = fake_course(tmp_path / "course")
    (root / "tests" / "test_lib.py").write_text(
        "import pytest\nfrom minattn.lib import f, g\n\n\n@pytest.mark.exercise('9.1')\n"
        "def test_f():\n    assert f(1) == 3\n\n\n@pytest.mark.exercise('9.2')\n"
        "def test_g():\n    assert g(1) == 2\n")
    regions = {f"{e.path}:{e.line}": e for e in all_exercises(root)}
    assert list(regions) == ["minattn/lib.py:4", "minattn/lib.py:11", "minattn/lib.py:17"]
    report = {"exercises": {"9.1": {"raised_at": ["minattn/lib.py:5"]},
                            "9.2": {"raised_at": ["minattn/lib.py:18"]}}}
    calls = []

    def run(args):  # the trace run: f_torch is never entered
        calls.append(args)
        return {"exercises": {"9.1": {"entered": ["minattn/lib.py:4"]}}}
    (problem,) = unreached(report, run, root)
    assert problem.startswith("exercise 9.1: no test marked with it reaches its region "
                              "minattn/lib.py:11 (tests that name its function: none)")
    assert calls == [["tests/test_lib.py", "--trace-regions", "--exercises", "9.1"]]
    report["exercises"]["9.1"]["raised_at"].append("minattn/lib.py:12")
    assert unreached(report, run, root) == [] and len(calls) == 1  # all reached first


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
    cells = ["import importlib\nfor m in %r:\n    importlib.import_module(m)" % modules,
             "from minattn.course.lesson import Lesson, show\nlesson = Lesson('00_check')",
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
def test_what_is_graded_and_under_which_name_comes_from_the_teacher(tmp_path):
    root = fake_course(tmp_path / "course")
    for where in ("a", "b"):
        (tmp_path / where / "alice").mkdir(parents=True)
    a, b = tmp_path / "a" / "alice", tmp_path / "b" / "alice"
    assert grading.submission_names([a, b]) == ["a/alice", "b/alice"]
    assert grading.submission_names([a]) == ["alice"]
    assert grading.submission_names([a, b], ["ann", "bea"]) == ["ann", "bea"]
    with pytest.raises(ValueError, match="would both be named 'alice'"):
        grading.submission_names([a, b], ["alice", "alice"])
    with pytest.raises(ValueError, match="given twice"):
        grading.submission_names([a, tmp_path / "a" / ".." / "a" / "alice"])
    with pytest.raises(ValueError, match="lies inside submission"):
        grading.submission_names([tmp_path / "a", a])
    with pytest.raises(ValueError, match="say which exercises were handed out"):
        grading.graded_ids(None, None, root)
    roster = tmp_path / "roster.txt"
    roster.write_text("# autumn class\n9.2  # handed out in week 3\n")
    assert grading.graded_ids(None, roster, root) == ["9.2"]
    assert grading.graded_ids(["9"], None, root) == ["9.1", "9.2"]
    with pytest.raises(ValueError, match="unknown exercise '9.9'"):
        grading.graded_ids(["9.9"], None, root)
    with pytest.raises(SystemExit):  # the command line insists on --only or --roster
        main(["grade", str(a), "--out", str(tmp_path / "g.csv")])


def check_course(tmp_path) -> Path:
    """The fake course with what the student's check needs (its tools, its conftests)."""
    root = fake_course(tmp_path / "course")
    shutil.copytree(REPO_ROOT / "minattn" / "course", root / "minattn" / "course",
                    ignore=shutil.ignore_patterns("__pycache__", "answers"))
    shutil.copy(REPO_ROOT / "conftest.py", root / "conftest.py")
    shutil.copy(REPO_ROOT / "tests" / "conftest.py", root / "tests" / "conftest.py")
    return root


@pytest.mark.slow
def test_the_check_prints_the_table_alone_naming_the_values_compared(tmp_path):
    """An unfinished copy's check once printed `error collecting ... NotImplementedError`
    above its table (a test file that calls an exercise at import), and a wrong answer's row
    said `assert np.False_`."""
    root = check_course(tmp_path)
    (root / "tests" / "test_lib.py").write_text(
        "import numpy as np\nimport pytest\nfrom minattn.lib import f, g\n\n"
        "@pytest.mark.exercise('9.1')\ndef test_f():\n"
        "    assert np.allclose(f(np.array([1.0, 2.0])), np.array([3.0, 4.0]))\n")
    (root / "tests" / "test_import.py").write_text(
        "import pytest\nfrom minattn.lib import g\n\nDOUBLED = g(2)\n\n\n"
        "@pytest.mark.exercise('9.2')\ndef test_g():\n    assert DOUBLED == 4\n")
    student = tmp_path / "student"
    make_student_copy(student, root)
    solve(student, "9.1", "return x + 3")  # wrong
    solve(student, "9.1", "return x + 3")
    proc = subprocess.run([sys.executable, "-m", "minattn.course.classroom", "check"], cwd=student,
                          env=env_for(student), capture_output=True, text=True, timeout=300)
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 1 and lines[0].split() == [
        "exercise", "kind", "state", "tests", "message"], proc.stdout + proc.stderr
    assert re.match(r"9\.1 +implement +FAIL +0/1 +test_f: assert allclose\(array\(\[4\., 5\.\]\), "
                    r"array\(\[3\., 4\.\]\)\)", lines[1]), lines[1]
    assert re.match(r"9\.2 +implement +not implemented yet +0/0 +double x", lines[2]), lines[2]
    assert lines[3:] == ["", "details (tracebacks): make exercises EX=9.1 TB=1"], lines


def test_grading_refuses_to_run_without_a_sandbox_unless_told(tmp_path, monkeypatch, capsys):
    root = fake_course(tmp_path / "course")
    sub = tmp_path / "sub"
    make_student_copy(sub, root)
    monkeypatch.setattr(grading, "bwrap_problem", lambda: "bubblewrap (bwrap) is not installed")
    with pytest.raises(ValueError, match=r"refusing to run students' code without a sandbox: "
                                         r"bubblewrap \(bwrap\) is not installed"
                                         r".*--unsafe-no-sandbox"):
        grading.grade([sub], tmp_path / "g.csv", only=["9.1"], root=root)
    assert not (tmp_path / "g.csv").exists()


def test_the_sandbox_starts_python_by_a_path_it_can_see(tmp_path, monkeypatch):
    """A venv reached through a link from a hidden folder (the checkout's .venv pointing
    elsewhere): the sandbox hides the link's folder, so Python is started by its resolved
    folder, keeping its name (a venv is found from that name's folder)."""
    from minattn.course.classroom import sandbox

    real = tmp_path / "real-venv" / "bin"
    real.mkdir(parents=True)
    (tmp_path / "checkout").mkdir()
    (tmp_path / "checkout" / ".venv").symlink_to(tmp_path / "real-venv")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "checkout" / ".venv" / "bin" / "python"))
    assert sandbox.python_executable() == str(real.resolve() / "python")


def test_collected_submissions_are_neither_tracked_nor_linted(tmp_path):
    """With students' copies collected in ./submissions/ (as the README shows), the teacher's
    own `make test` once failed at `ruff check .` on the students' code."""
    if (REPO_ROOT / ".git").exists():
        for path in ("submissions/alice/minattn/lib.py", "grades.csv"):
            ignored = subprocess.run(["git", "check-ignore", "-q", "--no-index", path],
                                     cwd=REPO_ROOT)
            assert ignored.returncode == 0, f"git would track {path}"
    shutil.copy(REPO_ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "submissions" / "alice").mkdir(parents=True)
    (tmp_path / "submissions" / "alice" / "lib.py").write_text("import os\n")  # unused import
    lint = [sys.executable, "-m", "ruff", "check", "--no-cache", "."]
    assert subprocess.run(lint, cwd=tmp_path, capture_output=True).returncode == 0
    (tmp_path / "mine.py").write_text("import os\n")
    assert subprocess.run(lint, cwd=tmp_path, capture_output=True).returncode == 1


def test_the_sandbox_shows_the_copy_the_environment_and_the_system_only(tmp_path):
    """An allow-list: a cheating submission once read the solutions from a second clone of the
    course elsewhere on the machine (the sandbox hid only the teacher's checkout). Here that
    second clone is this checkout, which grades nothing."""
    from minattn.course.classroom import sandbox
    from minattn.course.classroom.grading import worker_env

    if (problem := sandbox.sandbox_problem()) is not None:
        pytest.skip(f"needs the sandbox: {problem}")
    (tmp_path / "copy").mkdir()
    (tmp_path / "elsewhere").mkdir()
    prefix = os.path.realpath(sys.prefix)  # a .venv that is a link: the sandbox binds its target
    paths = [str(REPO_ROOT / "minattn"), str(tmp_path / "elsewhere"), "/opt", "/srv",
             "/usr/lib", prefix, sandbox.INSIDE]
    probe = ("import json, os, sys, numpy\nopen('mine.txt', 'w').write('x')\n"
             f"print(json.dumps({{p: os.path.exists(p) for p in {paths!r}}}))")
    proc = sandbox.spawn(tmp_path / "copy", [], [sandbox.python_executable(), "-s", "-c", probe],
                         worker_env(Path(sandbox.INSIDE)), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()[-2000:]
    seen = json.loads(out.decode().splitlines()[-1])
    assert seen == {str(REPO_ROOT / "minattn"): False, str(tmp_path / "elsewhere"): False,
                    "/opt": False, "/srv": False, "/usr/lib": True, prefix: True,
                    sandbox.INSIDE: True}, seen
    assert (tmp_path / "copy" / "mine.txt").read_text() == "x"  # the copy, and only it, writable


def test_the_sandbox_binds_the_environment_after_its_empty_tmp(tmp_path, monkeypatch):
    """bwrap applies its options in order: `--tmpfs /tmp` once came after the environment's
    bind, so a course cloned under /tmp graded nothing (`bwrap: execvp .../.venv/bin/python: No
    such file or directory`). An environment inside a hidden folder is bound again after it."""
    from minattn.course.classroom import sandbox

    venv, checkout = tmp_path / "clone" / ".venv", tmp_path / "clone"
    venv.mkdir(parents=True)
    monkeypatch.setattr(sandbox, "_python_dirs", lambda: [str(venv.resolve())])
    monkeypatch.setattr(sandbox, "SYSTEM", ("/usr", "/etc", str(tmp_path.resolve())))
    args = sandbox.bwrap_options(tmp_path, [str(checkout)], {})
    pairs = [(a, b) for a, b in zip(args, args[1:])]
    empty_tmp = pairs.index(("--tmpfs", "/tmp"))
    hidden = pairs.index(("--tmpfs", str(checkout.resolve())))
    binds = [i for i, p in enumerate(pairs) if p == ("--ro-bind", str(venv.resolve()))]
    assert binds and binds[-1] > hidden > empty_tmp, args
    assert pairs.index(("--ro-bind", "/usr")) > empty_tmp
    assert args[-5:] == ["--bind", str(tmp_path.resolve()), sandbox.INSIDE, "--chdir",
                         sandbox.INSIDE]


def test_a_sandbox_that_cannot_start_python_is_one_line_for_the_teacher(tmp_path, monkeypatch,
                                                                         capsys):
    """No traceback: why (bwrap's own words) and what to do, as `error: ...`, exit code 2."""
    from minattn.course.classroom import sandbox

    if (problem := bwrap_problem()) is not None:
        pytest.skip(f"needs bubblewrap: {problem}")
    monkeypatch.setattr(sandbox, "python_executable", lambda: "/nowhere/bin/python")
    (tmp_path / "alice").mkdir()
    assert main(["grade", str(tmp_path / "alice"), "--only", "1.1",
                 "--out", str(tmp_path / "g.csv")]) == 2
    out, err = capsys.readouterr()
    (line,) = err.strip().splitlines()
    assert line.startswith("error: the sandbox could not start Python (bwrap: execvp "
                           "/nowhere/bin/python: No such file or directory). It shows only /usr, ")
    assert line.endswith("or grade trusted code with --unsafe-no-sandbox"), line
    assert not (tmp_path / "g.csv").exists()


def test_a_copy_of_the_course_the_sandbox_still_shows_is_found(tmp_path, monkeypatch):
    """What the grader warns about (say a minattn installed into the environment)."""
    from minattn.course.classroom import sandbox

    clone = tmp_path / "site" / "deep" / "clone"
    (clone / "minattn" / "course" / "classroom").mkdir(parents=True)
    (clone / "minattn" / "course" / "classroom" / "regions.py").write_text("")
    (tmp_path / "site" / "minattn").mkdir()  # a package of that name, not the course
    assert sandbox.find_courses([str(tmp_path / "site")]) == [str(clone)]
    assert sandbox.find_courses([str(tmp_path / "site")], depth=2) == []
    monkeypatch.setattr(sandbox, "scan_roots", lambda: [str(tmp_path / "site")])
    found = sandbox.check_start(tmp_path / "work", [], {"PATH": os.environ["PATH"]}, unsafe=True)
    assert found == [str(clone)]


def test_a_reply_from_the_worker_is_read_without_trusting_it():
    import numpy as np

    from minattn.course.classroom import protocol

    blobs = []
    value = (np.arange(6.0).reshape(2, 3), {"k": [1, 2.5, None, "s"]}, {3}, np.float32(2), 7 + 1j,
             np.float64(1.0), np.bool_(True))
    tree = protocol.encode(value, blobs)
    back = protocol.decode(json.loads(json.dumps(tree)), blobs)
    assert np.array_equal(back[0], value[0]) and back[1:] == value[1:]
    assert [type(v) for v in back[3:]] == [np.float32, complex, np.float64, np.bool_]
    for bad in (["np", "|O8", [1], 0], ["np", "<f8", [2], 0], ["np", "<f8", [-1], 0],
                ["pickle", "x"], ["np", "<f8", [3], 5], ["dict", [["a"]]], "v", [],
                ["tensor", "float64", [1], "cuda;rm", 0, -1]):
        with pytest.raises(protocol.ProtocolError):
            protocol.decode(bad, [np.zeros(3).tobytes()])
    with pytest.raises(TypeError, match="only numbers"):
        protocol.encode(object(), [])
    with pytest.raises(TypeError, match="dtype object"):
        protocol.encode(np.array([object()]), [])
    skip = protocol.rebuild_error({"type": "Skipped", "message": "nothing here"})
    assert type(skip) is protocol.SubmissionError and "Skipped: nothing here" in str(skip)
    assert type(protocol.rebuild_error({"type": "ValueError", "message": "bad x"})) is ValueError
    exit_ = protocol.rebuild_error({"type": "SystemExit", "message": "0"})
    assert type(exit_) is protocol.SubmissionError
    import io
    stream = io.BytesIO()
    protocol.send(stream, {"op": "ok"}, [b"abc"])
    stream.seek(0)
    assert protocol.receive(stream) == ({"op": "ok"}, [b"abc"])
    stream.seek(0)
    with pytest.raises(protocol.ProtocolError, match="limit"):
        protocol.receive(stream, limit=8)


def test_only_top_level_functions_are_routed_and_closures_are_stubbed():
    """A region inside a closure (a FlexAttention mask_mod) cannot be sent to the submission's
    process: the grader stubs it in the teacher's process instead of using the teacher's body."""
    from minattn.course.classroom.stubs import holders

    nested = []
    routed = holders({"2.1"}, REPO_ROOT, nested)
    assert ("minattn.sparse", "sliding_window_mask_np") in routed
    assert all(module != "minattn.fast.flex" for module, _ in routed)
    assert nested == (["2.1"] if any(e.id == "2.1" and str(e.path) == "minattn/fast/flex.py"
                                     for e in all_exercises()) else [])


def grading_course(tmp_path) -> Path:
    """The fake course with the tools, conftests and exercise tests the grader needs."""
    root = check_course(tmp_path)
    (root / "tests" / "test_lib.py").write_text(  # 9.1's tests first: more than 3 of them
        "import pytest\n\n@pytest.mark.exercise('9.1')\ndef test_f():\n"
        "    from minattn.lib import f\n    assert f(1) == 3\n\n"
        "@pytest.mark.exercise('9.1')\n@pytest.mark.parametrize('x', [2, 3, 4])\n"
        "def test_f_more(x):\n    from minattn.lib import f\n    assert f(x) == x + 2\n\n"
        "@pytest.mark.exercise('9.2')\ndef test_g():\n    from minattn.lib import g\n"
        "    assert g(2) == 4\n")
    (root / "tests" / "test_top.py").write_text(  # imports at the top: the teacher's, always
        "import pytest\nfrom minattn.lib import g\n\n@pytest.mark.exercise('9.2')\n"
        "def test_g_again():\n    assert g(3) == 6\n")
    return root


@pytest.mark.slow
def test_grading_survives_submissions_that_hang_crash_break_or_share_a_name(tmp_path, capsys,
                                                                          monkeypatch):
    """In the sandbox when bubblewrap works here, else (these submissions only hang, exit or
    break their own files) without it. A call's limit is 1 s here, and 1 s more for a new
    process's first call, which imports the submission (~0.2 s here; in a class at most a
    minute each, a tenth and a quarter of the timeout): every hang waits it out."""
    monkeypatch.setattr(grading, "CALL_TIMEOUT", 1)
    monkeypatch.setattr(grading, "START_TIMEOUT", 1)
    root = grading_course(tmp_path)
    subs = tmp_path / "class"
    carol, erin, ann, bea, dave, frank = (subs / n for n in ("carol", "erin", "a/alice",
                                                             "b/alice", "dave", "frank"))
    for sub in (carol, erin, ann, bea, dave, frank):
        make_student_copy(sub, root)
    solve(dave, "9.1", "return x + 1")  # wrong: the gradebook says so without the answer
    solve(dave, "9.1", "return x + 1")
    (subs / "dave.zip").write_bytes(b"PK\x05\x06" + bytes(18))  # collected beside the folders
    solve(carol, "9.1", "return x + 2")
    solve(carol, "9.1", "return x + 2")
    solve(carol, "9.2", "import time\n    time.sleep(3600)")  # hangs (without using the CPU)
    solve(frank, "9.1", "import time\n    time.sleep(3600)")  # hangs first, then
    solve(frank, "9.1", "return x + 2")
    solve(frank, "9.2", "return x + x")  # right: the hang before it costs it nothing
    solve(erin, "9.1", "return x +")  # a syntax error: every call of the file fails
    solve(ann, "9.1", "import os\n    os._exit(0)")  # ends the process, "successfully"
    solve(ann, "9.1", "return x + 2")
    solve(ann, "9.2", "return x + x")
    text = solve(bea, "9.2", "return x * 2")  # ... and deletes 9.1's first END marker
    (bea / "minattn" / "lib.py").write_text(text.replace("    # END EXERCISE\n", "", 1))
    (bea / ".student-copy").unlink()  # no manifest: graded on what the teacher lists, no more
    unsafe = sandbox_problem() is not None
    rows = grading.grade([carol, erin, ann, bea, dave, frank, subs / "dave.zip"],
                         tmp_path / "g.csv", only=["9"], timeout=20, root=root, unsafe=unsafe)
    said = capsys.readouterr()
    assert f"skipped {subs / 'dave.zip'}: not a folder" in said.out
    assert "not handed out" not in said.err  # every copy hands out 9.1 and 9.2
    got = {(r["submission"], r["exercise"]): r for r in rows}
    assert [r["submission"] for r in csv.DictReader((tmp_path / "g.csv").open())] == [
        n for n in ("carol", "erin", "a/alice", "b/alice", "dave", "frank") for _ in range(2)]
    for (name, ex_id), row in got.items():
        assert int(row["total"]) == {"9.1": 4, "9.2": 2}[ex_id], row  # the teacher's count
    assert got["carol", "9.1"]["passed"] == 4
    wrong = got["dave", "9.1"]["first_failure"]  # the test said `assert 2 == 3`
    assert wrong.startswith("test_f: AssertionError (") and not re.search(r"\d", wrong), wrong
    assert got["carol", "9.2"]["passed"] == 0
    hung = got["carol", "9.2"]["first_failure"]
    assert "took more than 1 s over g and was ended" in hung, hung
    assert got["frank", "9.1"]["passed"] == 0 and got["frank", "9.2"]["passed"] == 2
    for ex_id in ("9.1", "9.2"):
        row = got["erin", ex_id]
        assert row["passed"] == 0 and "SyntaxError" in row["first_failure"]
    # the process died in each of 9.1's four tests (three starts, then no more for 9.1); 9.2
    # still got a process of its own: a crash budget per exercise, not per submission
    assert got["a/alice", "9.1"]["passed"] == 0
    assert "ended during f (exit code 0)" in got["a/alice", "9.1"]["first_failure"]
    assert got["a/alice", "9.2"]["passed"] == 2
    row = got["b/alice", "9.1"]
    assert row["passed"] == 0 and row["first_failure"].startswith(
        "exercise 9.1: END marker missing in minattn/lib.py (BEGIN at line 4")
    assert got["b/alice", "9.2"]["passed"] == 2


def test_grading_warns_of_an_exercise_the_copy_never_handed_out(tmp_path, capsys):
    """A copy keeps the teacher's solution of every exercise it did not hand out: grading one
    of those passes an untouched copy, so the grader says so (the grade is still the tests')."""
    root = grading_course(tmp_path)
    sub = tmp_path / "class" / "gus"
    make_student_copy(sub, root, only=["9.1"])
    rows = grading.grade([sub], None, only=["9"], timeout=20, root=root,
                         unsafe=sandbox_problem() is not None)
    assert {r["exercise"]: r["passed"] for r in rows} == {"9.1": 0, "9.2": 2}
    assert "warning: gus: 9.2 not handed out in this copy (its manifest lists 9.1)" in \
        capsys.readouterr().err


def test_the_check_refuses_a_copy_whose_environment_imports_another(student, tmp_path):
    """The console script of another checkout's environment would check that checkout (the
    teacher's, with its solutions): from inside a copy it refuses, naming both."""
    proc = subprocess.run([sys.executable, "-m", "minattn.course.classroom", "check", "1.1"],
                          cwd=student / "tests", capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert f"this folder belongs to {student.resolve()}" in proc.stderr
    assert f"found {REPO_ROOT.resolve() / 'minattn'}" in proc.stderr


@pytest.mark.slow
def test_the_gradebook_says_what_form_a_predict_answer_should_have(tmp_path):
    """A str for a float once reached grades.csv as `UFuncTypeError ... dtype('<U10')` (issue
    45): the row says what the question asks for, in the student's check's words."""
    root = grading_course(tmp_path)
    (root / "minattn" / "answers.py").write_text(
        "def weight() -> float:\n    # BEGIN EXERCISE 9.3 predict: a weight\n    return 0.5\n"
        "    # END EXERCISE\n")
    (root / "tests" / "hidden" / "test_hidden_answers.py").write_text(
        "import numpy as np\nimport pytest\n\n\n@pytest.mark.exercise('9.3')\n"
        "def test_weight():\n    from minattn.answers import weight\n"
        "    assert np.isclose(weight(), 0.5, atol=0.01)\n")
    subs = tmp_path / "class"
    for name, value in (("ann", "'0.5'"), ("bob", "0.5")):
        make_student_copy(subs / name, root)
        path = subs / name / "minattn" / "answers.py"
        path.write_text(path.read_text().replace(
            'raise NotImplementedError("Exercise 9.3: a weight")', f"return {value}"))
    rows = grading.grade([subs / "ann", subs / "bob"], tmp_path / "g.csv", only=["9.3"],
                         timeout=60, root=root, unsafe=sandbox_problem() is not None)
    ann, bob = rows
    assert (ann["passed"], bob["passed"], bob["total"]) == (0, 1, 1), rows
    assert ann["first_failure"] == (
        "test_weight: AnswerFormError: " + answer_form_problem(
            "9.3", "weight", "float", "0.5")), ann
    assert "it should return a number (a float, e.g. 0.25)" in ann["first_failure"]


@pytest.mark.slow
def test_an_interrupted_grading_keeps_who_was_graded_and_resumes_with_the_rest(tmp_path):
    """Ctrl-C once lost the whole gradebook (issue 45): each submission's rows go into it as
    soon as it is graded; the interruption names who was not graded, and --resume grades
    only them, keeping the rows already there."""
    root = grading_course(tmp_path)
    subs = tmp_path / "class"
    for name in ("ann", "bob"):
        make_student_copy(subs / name, root)
    for ex_id, body in (("9.1", "return x + 2"), ("9.1", "return x + 2"), ("9.2", "return 2 * x")):
        solve(subs / "ann", ex_id, body)
    solve(subs / "bob", "9.1", "import time\n    time.sleep(3600)")  # still running at Ctrl-C
    book = tmp_path / "marks" / "g.csv"
    book.parent.mkdir()
    unsafe = ["--unsafe-no-sandbox"] if sandbox_problem() is not None else []
    cmd = [sys.executable, "-m", "minattn.course.classroom", "grade", str(subs / "ann"),
           str(subs / "bob"), "--only", "9", "--out", str(book), "--timeout", "300", *unsafe]
    proc = subprocess.Popen(cmd, cwd=root, env=env_for(root), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    for _ in range(1200):
        if book.exists() and "ann,9.2" in book.read_text() or proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out + err
    assert ("grading interrupted: 1 of 2 submissions graded in " in err
            and "; not graded: bob (grade them with the same command and --resume)" in err), err
    rows = list(csv.DictReader(book.open()))
    assert [(r["submission"], r["exercise"], r["passed"]) for r in rows] == [
        ("ann", "9.1", "4"), ("ann", "9.2", "2")]

    lib = subs / "bob" / "minattn" / "lib.py"  # bob finishes 9.1; 9.2 is still a stub
    lib.write_text(lib.read_text().replace("import time\n    time.sleep(3600)", "return x + 2"))
    (subs / "ann" / "minattn" / "lib.py").write_text("broken")  # kept, never graded again
    proc = subprocess.run([*cmd[:-1 - len(unsafe)], "60", *unsafe, "--resume"], cwd=root,
                          env=env_for(root), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 submissions graded already, 1 to grade" in proc.stdout
    rows = list(csv.DictReader(book.open()))
    assert [(r["submission"], r["exercise"]) for r in rows] == [
        ("ann", "9.1"), ("ann", "9.2"), ("bob", "9.1"), ("bob", "9.2")]
    assert rows[1]["passed"] == "2" and rows[2]["passed"] == "4" and rows[3]["passed"] == "0"


def _course_whose_test_hangs(folder: Path) -> tuple[Path, Path]:
    """A fake course whose one test of exercise 9.1 writes its pid to a file, then hangs:
    (the course, that file)."""
    root = fake_course(folder / "course")
    shutil.copytree(REPO_ROOT / "minattn" / "course", root / "minattn" / "course",
                    ignore=shutil.ignore_patterns("__pycache__", "answers"))
    shutil.copy(REPO_ROOT / "conftest.py", root / "conftest.py")
    shutil.copy(REPO_ROOT / "tests" / "conftest.py", root / "tests" / "conftest.py")
    pid_file = folder / "pytest.pid"
    (root / "tests" / "test_lib.py").write_text(
        "import os, time, pytest\n\n@pytest.mark.exercise('9.1')\ndef test_f():\n"
        f"    open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n    time.sleep(3600)\n")
    return root, pid_file


@pytest.mark.slow
def test_the_check_ends_everything_it_started_on_ctrl_c_and_on_its_time_limit(tmp_path):
    cmd = [sys.executable, "-m", "minattn.course.classroom", "check", "9.1"]
    # the check with a time limit, in a course of its own: it waits out its 4 s meanwhile
    timed_root, timed_pid = _course_whose_test_hangs(tmp_path / "timed")
    timed = subprocess.Popen(cmd + ["--timeout", "4"], cwd=timed_root, env=env_for(timed_root),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    root, pid_file = _course_whose_test_hangs(tmp_path / "interrupted")
    proc = subprocess.Popen(cmd, cwd=root, env=env_for(root), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    for _ in range(600):
        if pid_file.exists() and pid_file.read_text():
            break
        time.sleep(0.1)
    child = int(pid_file.read_text())
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and err.strip() == "interrupted", err  # no traceback
    for _ in range(50):  # killed with its group, then reaped
        if not Path(f"/proc/{child}").exists():
            break
        time.sleep(0.1)
    assert not Path(f"/proc/{child}").exists(), "pytest outlived Ctrl-C"
    out, err = timed.communicate(timeout=120)
    assert timed.returncode == 1, out + err
    if timed_pid.exists():  # (its pytest gets there in ~0.6 s of CPU; a busy machine may not)
        child = int(timed_pid.read_text())
        assert not Path(f"/proc/{child}").exists()
        assert "timed out after 4 s in tests/test_lib.py::test_f" in out
    assert "the check timed out after 4 s in " in out
    assert re.search(r"^9\.1 +implement +FAIL +0/1 +did not finish", out, re.M), out
