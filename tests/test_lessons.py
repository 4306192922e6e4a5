"""Every lesson runs top to bottom as a script in smoke mode (new lessons are picked up
automatically), and lesson 01 also runs as a generated notebook through a real Jupyter kernel."""

import os
import subprocess
import sys

import pytest

from minattn.tools.course import build_notebooks, lesson_files
from minattn.tools.lesson import REPO_ROOT

LESSONS = lesson_files()


def smoke_env(tmp_path):
    env = os.environ.copy()
    env.update(MINATTN_SMOKE="1", MINATTN_FIGURES=str(tmp_path / "figures"), MPLBACKEND="Agg")
    return env


def test_there_are_lessons():
    assert LESSONS, "no lessons/NN_*.py found"


@pytest.mark.parametrize("lesson", LESSONS, ids=[p.stem for p in LESSONS])
def test_lesson_runs_as_script_in_smoke_mode(lesson, tmp_path):
    proc = subprocess.run([sys.executable, str(lesson)], cwd=REPO_ROOT, env=smoke_env(tmp_path),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{lesson.name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    figures = list((tmp_path / "figures" / lesson.stem).glob("*.png"))
    assert figures, f"{lesson.name} saved no figure"


def test_lesson_01_runs_as_notebook(tmp_path):
    nbclient = pytest.importorskip("nbclient")
    import nbformat

    (path,) = build_notebooks(tmp_path, [p for p in LESSONS if p.name.startswith("01_")])
    notebook = nbformat.read(path, as_version=4)
    old = {k: os.environ.get(k) for k in ("MINATTN_SMOKE", "MINATTN_FIGURES")}
    os.environ.update(MINATTN_SMOKE="1", MINATTN_FIGURES=str(tmp_path / "figures"))
    try:
        client = nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                                         resources={"metadata": {"path": str(REPO_ROOT)}})
        client.execute()
    finally:
        for key, value in old.items():
            os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert images, "the notebook showed no figure inline"
