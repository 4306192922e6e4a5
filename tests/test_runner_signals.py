"""Ctrl-C and SIGTERM stop `make course` at any moment (minattn/course/course.py).

Each test runs the runner in a process of its own session, as a terminal runs `make course`, and
sends the signal to that whole process group at one moment: while a lesson's kernel starts,
while a cell runs, while the page is exported, between two lessons. Whatever the moment, the run
stops there: the interrupted lesson's notebook, page and claims, the index and REPORT.md are
those of before (what ran is in notebooks/backups/), nothing is recorded as FAILED, no later
lesson starts, one line says so and the exit status is 128 + the signal's number.

The moments without a kernel (the export, between lessons) run in this process, the kernel's
run replaced by a notebook made up on the spot (`course.run_notebook`) and the signal sent to
this process, so that they take a second or two; the moments with a kernel start one (slow).
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest

from minattn.course import course
from minattn.course.pages import export_html

OLD_CLAIMS = json.dumps([{"lesson": "97_first", "claim": "old", "outcome": "reproduced"}])
NEW_CLAIMS = json.dumps([{"lesson": "97_first", "claim": "new", "outcome": "contradicted"}])

# The kernel's part of a lesson: record a claim as Lesson does (claims.json.partial), then, at
# the moment "cell", signal the runner's process group (the kernel has a session of its own).
CELL = """\
import json, os, pathlib, signal, time
d = pathlib.Path(os.environ['MINATTN_FIGURES']) / '{stem}'
d.mkdir(parents=True, exist_ok=True)
(d / 'claims.json.partial').write_text({claims!r})
print('started', flush=True)
if {signal_in_cell}:
    os.killpg(os.getpgid(int(os.environ['JPY_PARENT_PID'])), {sig})
    time.sleep(60)
"""

# What the driver does at each moment of a run with a kernel, before the runner's own step.
MOMENTS = {
    "kernel start": """
import nbclient
start_client = nbclient.NotebookClient.async_start_new_kernel_client
async def async_start_new_kernel_client(self):  # the kernel is launched, not yet ready
    os.killpg(os.getpgrp(), SIG)
    return await start_client(self)
nbclient.NotebookClient.async_start_new_kernel_client = async_start_new_kernel_client
""",
    "cell": "",
}


def lesson_file(root, stem, body):
    path = root / "lessons" / f"{stem}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# %% [markdown]\n# # Lesson {stem[:2]} — {stem}\n\n# %%\n{body}\n")
    return path


def previous_build(root):
    """A finished earlier build: 97_first's notebook, page and claims, the index, REPORT.md."""
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Lesson 97 — first"),
        nbformat.v4.new_code_cell("print(1)", outputs=[
            nbformat.v4.new_output("stream", name="stdout", text="the previous run\n")])],
        metadata={"minattn": {"ok": True, "smoke": False, "seconds": 900.0, "error": ""}})
    ipynb = root / "notebooks" / "97_first.ipynb"
    ipynb.parent.mkdir(parents=True)
    course.write_notebook(notebook, ipynb)
    export_html(notebook, ipynb.with_suffix(".html"))
    (root / "notebooks" / "index.html").write_text("the previous index")
    (root / "figures" / "97_first").mkdir(parents=True)
    (root / "figures" / "97_first" / "claims.json").write_text(OLD_CLAIMS)
    (root / "figures" / "REPORT.md").write_text("the previous report")


WATCHED = ("notebooks/97_first.ipynb", "notebooks/97_first.html", "notebooks/index.html",
           "figures/97_first/claims.json", "figures/REPORT.md")


def state(root):
    return {name: (root / name).read_bytes() for name in WATCHED}


def lessons(root, moment=None, sig=signal.SIGINT):
    signal_in_cell = moment == "cell"
    return [lesson_file(root, "97_first", CELL.format(
                stem="97_first", claims=NEW_CLAIMS, signal_in_cell=signal_in_cell, sig=int(sig))),
            lesson_file(root, "98_second", "print('second')")]


def run_course(root, moment, sig, timeout=120):
    """Run the course on lessons 97_first and 98_second of `root` in a session of its own,
    its process group signalled at `moment`; returns (exit status, stdout, stderr)."""
    first, second = lessons(root, moment, sig)
    driver = root / "run.py"
    driver.write_text(textwrap.dedent(f"""\
        import os, sys
        from pathlib import Path
        from minattn.course import course
        SIG = {int(sig)}
        course.REPO_ROOT = Path({str(root)!r})
        course.lesson_files = lambda root=None: [Path({str(first)!r}), Path({str(second)!r})]
        """) + MOMENTS[moment] + "\nsys.exit(course.main([]))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MINATTN_")}
    proc = subprocess.run([sys.executable, str(driver)], cwd=root, env=env, text=True,
                          capture_output=True, timeout=timeout, start_new_session=True)
    return proc.returncode, proc.stdout, proc.stderr


def run_without_kernel(root, moment, sig, monkeypatch, capsys, error="", times=1):
    """The same run in this process, each kernel's run made up on the spot (with its claims),
    this process signalled at `moment` ("export", "between lessons" or None)."""
    monkeypatch.setattr(course, "REPO_ROOT", root)
    monkeypatch.setattr(course, "lesson_files", lambda root=None: lessons(root_))
    root_ = root
    for name in [k for k in os.environ if k.startswith("MINATTN_")]:
        monkeypatch.delenv(name)

    def run_notebook(lesson, env, timeout=None, progress=True):
        folder = Path(env["MINATTN_FIGURES"]) / lesson.stem
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "claims.json.partial").write_text(NEW_CLAIMS)
        notebook = course.lesson_notebook(lesson)
        notebook.cells[-1].outputs = [nbformat.v4.new_output("stream", name="stdout",
                                                             text="ran\n")]
        return notebook, error if lesson.stem == "97_first" else ""
    monkeypatch.setattr(course, "run_notebook", run_notebook)
    if moment == "export":
        export = course.export_html

        def export_html(notebook, path):
            for _ in range(times):
                os.kill(os.getpid(), sig)
            export(notebook, path)
        monkeypatch.setattr(course, "export_html", export_html)
    elif moment == "between lessons":
        execute = course.execute_lesson

        def execute_lesson(*args, **kwargs):
            run = execute(*args, **kwargs)
            os.kill(os.getpid(), sig)
            return run
        monkeypatch.setattr(course, "execute_lesson", execute_lesson)
    code = course.main([])
    out, err = capsys.readouterr()
    return code, out, err


def assert_stopped(root, before, code, out, err, sig):
    """Everything as it was before 97_first started; what ran is in backups/; one line."""
    assert code == 128 + sig, (code, out, err)
    assert "Traceback" not in err and "FAILED" not in out + err, out + err
    assert state(root) == before
    (partial,) = (root / "notebooks" / "backups").glob("97_first-interrupted-*.ipynb")
    meta = nbformat.read(partial, as_version=4).metadata["minattn"]
    assert meta["interrupted"] and meta["error"] == f"interrupted ({sig.name})"
    assert err.strip().splitlines()[-1] == (
        f"interrupted ({sig.name}): 0 of 2 lessons finished (none); what ran of 97_first is in "
        f"notebooks/backups/{partial.name}, its previous notebook, page and claims are kept")
    assert not (root / "notebooks" / "98_second.ipynb").exists()  # the next lesson never ran
    assert "98_second" not in out
    assert not list((root / "notebooks").glob(".*"))  # no temporary file left
    return partial


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_the_export_replaces_nothing(tmp_path, sig, monkeypatch, capsys):
    previous_build(tmp_path)
    before = state(tmp_path)
    code, out, err = run_without_kernel(tmp_path, "export", sig, monkeypatch, capsys)
    partial = assert_stopped(tmp_path, before, code, out, err, sig)
    assert nbformat.read(partial, as_version=4).cells[-1].outputs[0].text == "ran\n"


def test_a_second_signal_outside_a_kernel_stops_at_once_replacing_nothing(tmp_path,
                                                                          monkeypatch, capsys):
    previous_build(tmp_path)
    before = state(tmp_path)
    code, out, err = run_without_kernel(tmp_path, "export", signal.SIGINT, monkeypatch, capsys,
                                        times=2)
    assert code == 130 and "Traceback" not in err, (code, out, err)
    assert err.strip().splitlines()[-2:] == ["SIGINT: stopping now", "interrupted (SIGINT): 0 "
                                             "of 2 lessons finished (none)"], err
    assert state(tmp_path) == before
    assert not list((tmp_path / "notebooks").glob(".*"))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_between_two_lessons_stops_before_the_next(tmp_path, sig, monkeypatch,
                                                           capsys):
    """The lesson that finished is in place, claims included; the next one never starts."""
    previous_build(tmp_path)
    code, out, err = run_without_kernel(tmp_path, "between lessons", sig, monkeypatch, capsys)
    assert code == 128 + sig, (code, out, err)
    assert err.strip().splitlines()[-1] == f"interrupted ({sig.name}): 1 of 2 lessons finished " \
                                           "(97_first)", err
    assert (tmp_path / "figures" / "97_first" / "claims.json").read_text() == NEW_CLAIMS
    ran = nbformat.read(tmp_path / "notebooks" / "97_first.ipynb", as_version=4)
    assert ran.cells[-1].outputs[0].text == "ran\n"
    assert not (tmp_path / "notebooks" / "98_second.ipynb").exists()
    assert "FAILED" not in out + err
    report = (tmp_path / "figures" / "REPORT.md").read_text()  # of what is there now
    assert "| 97_first | new |" in report


def test_without_a_signal_the_run_moves_its_claims_into_place(tmp_path, monkeypatch, capsys):
    """The control: the same run left alone replaces the notebook, page, claims, index, report."""
    previous_build(tmp_path)
    before = state(tmp_path)
    code, out, err = run_without_kernel(tmp_path, None, signal.SIGINT, monkeypatch, capsys)
    assert code == 0, (code, out, err)
    after = state(tmp_path)
    assert all(after[name] != before[name] for name in WATCHED), after
    assert after["figures/97_first/claims.json"].decode() == NEW_CLAIMS
    assert not (tmp_path / "figures" / "97_first" / "claims.json.partial").exists()
    assert (tmp_path / "notebooks" / "98_second.ipynb").exists()


def test_a_failing_lesson_is_failed_keeps_the_previous_claims_and_the_next_one_runs(
        tmp_path, monkeypatch, capsys):
    """What a signal is not: a cell that raised (KeyboardInterrupt included) is a failure."""
    previous_build(tmp_path)
    code, out, err = run_without_kernel(tmp_path, None, signal.SIGINT, monkeypatch, capsys,
                                        error="KeyboardInterrupt: raised by the cell")
    assert code == 1 and "FAILED: KeyboardInterrupt: raised by the cell" in out, out + err
    assert "interrupted" not in out + err
    assert (tmp_path / "figures" / "97_first" / "claims.json").read_text() == OLD_CLAIMS
    assert (tmp_path / "notebooks" / "98_second.ipynb").exists()
    (backup,) = (tmp_path / "notebooks" / "backups").glob("97_first-*.ipynb")  # the finished run
    assert "interrupted" not in backup.name


@pytest.mark.slow
# Each moment once and each signal once (a real kernel per case, ~4 s each): the two signals
# take one path through the runner, told apart only by the exit status, which both cases check.
@pytest.mark.parametrize("moment,sig", [("kernel start", signal.SIGINT),
                                        ("cell", signal.SIGTERM)])
def test_a_signal_while_the_kernel_starts_or_a_cell_runs_replaces_nothing(tmp_path, moment,
                                                                          sig):
    """A real kernel. Once, Ctrl-C while lesson 05's kernel started recorded it as FAILED and
    the course went on to lesson 06; SIGTERM did the same to 06."""
    previous_build(tmp_path)
    before = state(tmp_path)
    code, out, err = run_course(tmp_path, moment, sig)
    partial = assert_stopped(tmp_path, before, code, out, err, sig)
    ran = nbformat.read(partial, as_version=4)
    outputs = [o for c in ran.cells for o in c.get("outputs", [])]
    if moment == "cell":  # the cell was interrupted, its output kept
        assert outputs[0].text == "started\n" and outputs[-1].ename == "KeyboardInterrupt"
    else:  # no cell ran
        assert outputs == []
