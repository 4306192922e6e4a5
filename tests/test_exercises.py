"""The classroom round trip: in a student copy each exercise's tests fail with that exercise's
NotImplementedError, and in the teacher's copy they all pass."""

import json
import os
import subprocess
import sys

import pytest

from minattn.tools.exercises import all_exercises, find_exercises, make_student_copy, strip_solutions
from minattn.tools.lesson import REPO_ROOT

SOURCE = '''def f(x):
    """doc"""
    y = x + 1
    # BEGIN EXERCISE 9.1 add two to x
    z = y + 1
    return z
    # END EXERCISE


def g(x):
    # BEGIN EXERCISE 9.2 double x
    return 2 * x
    # END EXERCISE
'''


def test_strip_solutions_replaces_the_body_and_keeps_markers():
    student = strip_solutions(SOURCE)
    assert "z = y + 1" not in student and "return 2 * x" not in student
    assert 'raise NotImplementedError("Exercise 9.1: add two to x")' in student
    assert "# BEGIN EXERCISE 9.1" in student and "# END EXERCISE" in student
    namespace = {}
    exec(compile(student, "<student>", "exec"), namespace)
    with pytest.raises(NotImplementedError, match="Exercise 9.1: add two to x"):
        namespace["f"](1)


def test_strip_only_some_exercises():
    namespace = {}
    exec(compile(strip_solutions(SOURCE, only={"9.2"}), "<student>", "exec"), namespace)
    assert namespace["f"](1) == 3
    with pytest.raises(NotImplementedError, match="Exercise 9.2: double x"):
        namespace["g"](1)


def test_unbalanced_markers_are_reported():
    with pytest.raises(ValueError, match="never closed"):
        find_exercises("# BEGIN EXERCISE 1.1 x\n")
    with pytest.raises(ValueError, match="without a BEGIN"):
        find_exercises("# END EXERCISE\n")


def run_exercise_tests(root, tmp_path, name, ids=()):
    report = tmp_path / f"{name}.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["PYTHONPATH"] = str(root)  # import *this* copy's minattn, not the installed one
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--exercise-report", str(report), "tests", "--exercises", *ids],
                          cwd=root, env=env, capture_output=True, text=True, timeout=600)
    return proc, json.loads(report.read_text())


@pytest.mark.slow
def test_round_trip_student_copy_fails_teacher_copy_passes(tmp_path):
    exercises = all_exercises()
    assert len(exercises) >= 3

    # The full student copy: every exercise test fails, and only with NotImplementedError.
    make_student_copy(tmp_path / "student")
    assert (tmp_path / "student" / ".student-copy").exists()
    proc, results = run_exercise_tests(tmp_path / "student", tmp_path, "student")
    assert proc.returncode != 0 and "not implemented yet" in proc.stdout
    for e in exercises:
        counts = results.get(e.id)
        assert counts, f"no test is marked @pytest.mark.exercise({e.id!r})"
        assert counts["failed"] == counts["not_implemented"] > 0, (e.id, counts)

    # One exercise removed at a time: its tests fail with its own message.
    for e in exercises:
        copy = tmp_path / f"only_{e.id}"
        make_student_copy(copy, only={e.id})
        proc, results = run_exercise_tests(copy, tmp_path, f"only_{e.id}", [e.id])
        counts = results[e.id]
        assert counts["passed"] == 0 and counts["failed"] == counts["not_implemented"] > 0, counts
        assert any(m.startswith(f"Exercise {e.id}:") for m in counts["messages"]), counts

    # The teacher's copy passes every exercise test.
    proc, results = run_exercise_tests(REPO_ROOT, tmp_path, "teacher")
    assert proc.returncode == 0, proc.stdout[-3000:]
    for e in exercises:
        assert results[e.id]["failed"] == 0 and results[e.id]["passed"] > 0, (e.id, results[e.id])
