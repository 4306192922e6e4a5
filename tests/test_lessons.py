"""Every lesson runs top to bottom as a script in smoke mode (new lessons are picked up
automatically); lesson 01 also runs the way `make course` runs it — once, as a notebook through
a real Jupyter kernel, kept with its outputs and exported to HTML — and the course report is
checked on fake claims."""

import json
import os
import re
import subprocess
import sys

import pytest

from minattn.tools.course import execute_lesson, export_html, lesson_files
from minattn.tools.fetch import data_root
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


def test_lesson_01_runs_as_notebook_with_outputs_and_html(tmp_path):
    """What `make smoke` does for one lesson: execute it once through a Jupyter kernel, keep the
    outputs, export HTML with the figures embedded."""
    import nbformat  # nbclient, nbconvert and nbformat are requirements: no skip

    env = smoke_env(tmp_path)  # its MPLBACKEND=Agg is dropped: the kernel shows figures inline
    (lesson,) = [p for p in LESSONS if p.name.startswith("01_")]
    run = execute_lesson(lesson, tmp_path / "notebooks", env=env, timeout=300, progress=False)
    assert run.ok, run.error
    notebook = nbformat.read(run.notebook, as_version=4)
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 3, "the notebook should show the lesson's figures inline"
    assert any(o.output_type == "stream" and "NumPy vs torch" in o.text for o in outputs)
    page = run.html.read_text()
    assert page.count("data:image/png;base64,") >= len(images)  # embedded, no side files
    assert images[0]["data"]["image/png"].strip()[:200] in page.replace("\n", "")
    assert list((tmp_path / "figures" / lesson.stem).glob("*.png")), "figures/ still written"
    assert notebook.metadata["minattn"]["smoke"] is True


TINY_LESSON = """# %% [markdown]
# # Lesson 98 — {summary}

# %%
print("hello from {name}")
{body}
"""


def write_tiny_lesson(folder, name, summary, body=""):
    path = folder / "lessons" / f"{name}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(TINY_LESSON.format(name=name, summary=summary, body=body))
    return path


def test_a_failing_lesson_fails_the_course_but_the_others_run(tmp_path, monkeypatch):
    import nbformat

    from minattn.tools import course

    broken = write_tiny_lesson(tmp_path, "97_broken", "fails on purpose", "raise RuntimeError('boom')")
    fine = write_tiny_lesson(tmp_path, "98_fine", "prints one line")
    monkeypatch.setattr(course, "lesson_files", lambda root=None: [broken, fine])
    monkeypatch.setenv("MINATTN_FIGURES", str(tmp_path / "figures"))
    assert course.main(["--out", str(tmp_path / "nb")]) == 1
    failed = nbformat.read(tmp_path / "nb" / "97_broken.ipynb", as_version=4)
    assert any(o.output_type == "error" for c in failed.cells for o in c.get("outputs", []))
    ran = nbformat.read(tmp_path / "nb" / "98_fine.ipynb", as_version=4)
    assert "hello from 98_fine" in ran.cells[1].outputs[0].text
    index = (tmp_path / "nb" / "index.html").read_text()
    assert "FAILED" in index and "prints one line" in index and "98_fine.html" in index
    assert (tmp_path / "figures" / "REPORT.md").is_file()


def test_course_report_collects_every_lessons_claims(tmp_path):
    from minattn.tools.course import collect_claims, write_report

    (tmp_path / "01_attention").mkdir()
    (tmp_path / "02_sparse").mkdir()
    (tmp_path / "01_attention" / "claims.json").write_text(json.dumps([
        dict(lesson="01_attention", claim="q·k has variance d", paper="d (Vaswani et al. 2017)",
             ours="63.8 at d = 64", why="finite sample", smoke=False)]))
    (tmp_path / "02_sparse" / "claims.json").write_text(json.dumps([
        dict(lesson="02_sparse", claim="a | in the text", paper="0.93", ours="0.5", why="",
             smoke=True),
        dict(lesson="02_sparse", claim="second", paper="1", ours="2", why="scale", smoke=False)]))
    (tmp_path / "03_empty").mkdir()
    (tmp_path / "03_empty" / "claims.json").write_text("[]")
    claims = collect_claims(tmp_path)
    assert [c["claim"] for c in claims] == ["q·k has variance d", "a | in the text", "second"]
    path, text = write_report(tmp_path)
    assert path == tmp_path / "REPORT.md" and path.read_text() == text
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert rows[0] == "| lesson | claim | paper | ours | why they differ |"
    assert len(rows) == 1 + 3
    assert "| 01_attention | q·k has variance d | d (Vaswani et al. 2017) | 63.8 at d = 64 | finite sample |" in rows
    assert "0.5 (smoke)" in rows[2] and "a \\| in the text" in rows[2]  # a | cannot break the row
    assert "(smoke)" not in rows[3] and "smoke-mode run" in text
    _, empty = write_report(tmp_path / "nothing")
    assert "No lesson recorded a claim." in empty


@pytest.mark.realdata
@pytest.mark.skipif(not (data_root() / "mathjax" / "mathjax.whl").exists(),
                    reason="needs data/mathjax (python data_scripts/mathjax.py)")
def test_html_pages_typeset_equations_with_a_local_mathjax(tmp_path):
    """Offline reading: the HTML page loads MathJax from notebooks/mathjax/, not a CDN."""
    import nbformat

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("$x^2$")])
    page = tmp_path / "page.html"
    export_html(notebook, page)
    text = page.read_text()
    assert 'src="mathjax/MathJax.js' in text and "ajax/libs/mathjax" not in text
    assert not re.search(r'<script[^>]*src="https?://', text)  # nothing loaded from a network
    assert (tmp_path / "mathjax" / "MathJax.js").exists()
    assert (tmp_path / "mathjax" / "config" / "TeX-AMS-MML_HTMLorMML-full.js").exists()
