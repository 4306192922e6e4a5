"""Each typical mistake of an implement exercise fails a visible test whose one-line message
names it (issue 45): the student's check says "the scores are not divided by √d", not
`assert np.False_`.

tests/hidden/mistakes/ holds the wrong solutions (teacher-only: each is a near-copy of an
answer), one file per mistake: EXERCISE, EXPECT (a phrase the failure must say) and the wrong
function(s). One pytest collects the visible tests of every exercise with a mistake, then runs
an exercise's tests once per mistake of it, swapped into the library (swap_mistake.py), as the
student's check runs them; each run's exercise report holds the tests' one-line messages."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from minattn.course import REPO_ROOT

HERE = Path(__file__).resolve().parent / "mistakes"
MISTAKES = sorted(HERE.glob("ex_*.py"))
_RUNS: dict[str, tuple[Path, str]] = {}  # "all" -> (the reports' folder, pytest's output)


def field(path: Path, name: str) -> str:
    return re.search(rf"^{name} = ['\"](.+)['\"]$", path.read_text(), re.M)[1]


def visible_test_files(ex_id: str) -> list[str]:
    """The visible test files that mark a test with the exercise."""
    mark = re.compile(rf"""mark\.exercise\(["']{re.escape(ex_id)}["']\)""")
    return sorted(str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / "tests").glob("test_*.py")
                  if mark.search(p.read_text()))


def run_mistakes(folder: Path) -> tuple[Path, str]:
    """The visible tests of every exercise with a mistake, collected once (one pytest), then run
    once per mistake with it swapped in: reports in folder."""
    if not _RUNS:
        exercises = sorted({field(p, "EXERCISE") for p in MISTAKES})
        files = sorted({f for ex_id in exercises for f in visible_test_files(ex_id)})
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
        env.update(PYTHONPATH=os.pathsep.join([str(REPO_ROOT), str(HERE)]), OMP_NUM_THREADS="1",
                   MINATTN_MISTAKES=os.pathsep.join(map(str, MISTAKES)),
                   MINATTN_MISTAKE_REPORTS=str(folder))
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=",
             "-p", "swap_mistake", "-q", "--tb=no", "--no-header", "--exercise-report",
             str(folder / "collected.json"), *files, "--exercises", *exercises],
            cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900)
        _RUNS["all"] = folder, proc.stdout[-3000:] + proc.stderr[-3000:]
    return _RUNS["all"]


@pytest.mark.slow
@pytest.mark.parametrize("path", MISTAKES, ids=lambda p: p.stem)
def test_a_typical_mistake_fails_a_visible_test_that_names_it(path, tmp_path_factory):
    ex_id, expect = field(path, "EXERCISE"), field(path, "EXPECT")
    folder, output = run_mistakes(tmp_path_factory.mktemp("mistakes"))
    report = folder / f"{path.stem}.json"
    assert report.exists(), output
    counts = json.loads(report.read_text())["exercises"][ex_id]
    failures = list(counts["failures"].values())
    assert failures, f"every visible test of {ex_id} passes with {path.name}"
    assert any(expect in f for f in failures), "\n".join(failures)
