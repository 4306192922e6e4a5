"""What a lesson loads: `show()` in a script and in a notebook, and never the classroom.

A lesson imports minattn/course/lesson.py and the mechanisms' packages; the classroom
(minattn/course/classroom/: student copies, grading, the sandbox) is the teacher's, and no lesson or
mechanism loads it (a lesson's own guard is minattn/course/checkout.py).
"""

import ast
import subprocess
import sys
import textwrap

import pytest

from minattn.course import REPO_ROOT, lesson
from minattn.course.prose import printed_numbers

TWINS = '''
def twice_np(x):
    """Twice x."""
    # BEGIN EXERCISE 9.1 implement: twice (~1 min)
    return 2 * x
    # END EXERCISE


def twice_torch(x):
    """Torch twin of twice_np."""
    # BEGIN EXERCISE 9.1
    return x + x
    # END EXERCISE
'''


@pytest.fixture
def twins(tmp_path, monkeypatch):
    (tmp_path / "show_twins.py").write_text(TWINS)
    monkeypatch.syspath_prepend(str(tmp_path))
    import show_twins

    return show_twins.twice_np, show_twins.twice_torch


def test_show_prints_the_real_source_without_exercise_markers_in_a_script(twins, capsys,
                                                                          monkeypatch):
    monkeypatch.setattr(lesson, "in_notebook", lambda: False)  # (other tests load ipykernel)
    lesson.show(*twins)
    out = capsys.readouterr().out
    assert "show_twins.twice_np  (" in out and "show_twins.twice_torch  (" in out
    assert "    return 2 * x\n" in out and "    return x + x\n" in out  # the code, all of it
    assert "EXERCISE" not in out
    assert out.index("twice_np") < out.index("twice_torch")
    assert printed_numbers(out + "0.5") == [0.5]  # a shown source is no result for the prose


def test_show_puts_twins_side_by_side_in_a_notebook(twins, monkeypatch):
    display = pytest.importorskip("IPython.display")
    shown = []
    monkeypatch.setattr(lesson, "in_notebook", lambda: True)
    monkeypatch.setattr(display, "display", shown.append)
    lesson.show(*twins)
    (block,) = shown
    assert isinstance(block, display.HTML)
    html = block.data
    assert "display: flex" in html and "flex-wrap: wrap" in html  # stacked when narrow
    assert html.count("<pre") == 2 and "EXERCISE" not in html
    assert html.index("twice_np") < html.index("twice_torch")
    lesson.show(twins[0])  # one source: a code block
    assert isinstance(shown[-1], display.Markdown) and "```python" in shown[-1].data
    assert "EXERCISE" not in shown[-1].data and "return 2 * x" in shown[-1].data


def test_no_lesson_and_no_mechanism_loads_the_classroom():
    """Importing the lesson machinery and every package and module of the library but the
    classroom itself (a fresh interpreter) leaves minattn.course.classroom unloaded."""
    code = textwrap.dedent("""
        import pkgutil, sys
        import minattn, minattn.course.lesson

        def walk(path, prefix):  # (pkgutil.walk_packages would import the classroom package)
            for info in pkgutil.iter_modules(path, prefix):
                if info.name != "minattn.course.classroom":
                    module = __import__(info.name, fromlist=["_"])
                    if info.ispkg:
                        walk(module.__path__, info.name + ".")

        walk(minattn.__path__, "minattn.")
        loaded = sorted(m for m in sys.modules if m.startswith("minattn.course.classroom"))
        assert not loaded, loaded
        print(len([m for m in sys.modules if m.startswith("minattn.")]))
    """)
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert int(proc.stdout) > 10  # the library was imported


def test_no_lesson_imports_the_classroom():
    for path in sorted((REPO_ROOT / "lessons").glob("[0-9][0-9]_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n.startswith("minattn.course.classroom") for n in names), path.name
