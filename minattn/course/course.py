"""Run the course: execute every lesson once as a notebook, export it, and report.

    python -m minattn.course.course                  # every lesson, full mode
    python -m minattn.course.course --only 01 03     # just these lessons
    MINATTN_SMOKE=1 python -m minattn.course.course  # every lesson in smoke mode (seconds each)
    python -m minattn.course.course --notebooks-only # unexecuted notebooks, to run yourself
    python -m minattn.course.course --class-pages    # notebooks/ as a class may see it

Each lesson (lessons/NN_x.py, jupytext percent format) becomes notebooks/NN_x.ipynb and is
executed ONCE through a Jupyter kernel (nbclient, over IPC), from the repository root, with
this process's environment (so MINATTN_SMOKE and friends apply). The executed notebook keeps
its printed results and inline figures; notebooks/NN_x.html is a static copy with the images
embedded (pages.py); notebooks/index.html lists every lesson page in the folder. Figures go to
figures/<lesson>/. Every paper claim a lesson records (`Lesson.claim`) is collected into one
table, printed and written to figures/REPORT.md. A failing lesson is kept (with its error
shown in the notebook; its claims stay those of its last run that finished) and makes the run
exit non-zero; the other lessons still run.

The pages to share with a class (--class-pages; `make class-pages`): a copy of a build
(notebooks/, or --out DIR) in <folder>-class/, where every listing of the library that a lesson
shows holds the exercises as a student's copy does -- the stub between the markers, not the
solution -- and an error's traceback only its last line. The build itself shows the
solutions: it is the teacher's.

Nothing of a learner's is overwritten. A smoke run has folders of its own, notebooks-smoke/
and figures-smoke/ (unless --out or MINATTN_FIGURES name others), so it never replaces a full
run's notebooks or claims. A blank build (--notebooks-only) keeps every notebook that holds
outputs or edits. A run that replaces a notebook its reader edited or ran (or a full run's
notebook with a smoke one, or a finished run's with a failed one) first copies it to
<folder>/backups/, and says so. Ctrl-C (SIGINT) or SIGTERM, at any moment (a kernel
starting, a cell, the export, between lessons), stops the whole run: the running cell is
interrupted, what ran goes to <folder>/backups/<lesson>-interrupted-<time>.ipynb, and that
lesson's notebook, page and claims stay as they were; no later lesson starts, one line says
what finished and what was kept, and the exit status is 128 + the signal (130, 143). A
lesson's claims (figures/<lesson>/claims.json.partial while it runs) are moved into place only
when its run finished. Every file is written whole (a temporary file, then renamed).

Every MINATTN_* setting is checked before anything is written (settings.py); a bad one is
refused in one line, exit status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import os
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from . import REPO_ROOT
from .pages import (
    ANSI,
    digest,
    export_html,
    printed_text,
    tidy_notebook,
    write_index,
    write_whole,
)
from .report import claims_html, collect_claims, write_report
from .settings import SettingsError, settings
from .stats import RULE

CELL_TIMEOUT = 1800  # seconds one cell may run (full-mode training cells take minutes on CPU)
# tqdm.auto in a kernel without ipywidgets warns, then prints the text bar the pages want.
KERNEL_WARNINGS = "ignore:IProgress not found"


def lesson_files(root: Path = REPO_ROOT) -> list[Path]:
    """lessons/NN_topic.py, in order."""
    return sorted((root / "lessons").glob("[0-9][0-9]_*.py"))


def _rel(path: Path) -> str:
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


def lesson_notebook(lesson: Path):
    """The lesson as an (unexecuted) nbformat notebook, run by the kernel the lesson names."""
    import jupytext

    notebook = jupytext.read(lesson)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    return notebook


# ============================================================================ writing notebooks
def _read(path: Path):
    import nbformat

    try:
        return nbformat.read(path, as_version=4)
    except Exception:  # noqa: BLE001 -- unreadable: treat it as someone's work
        return None


def edited(old) -> bool:
    """Whether a notebook was changed since the course wrote it: edited, run, or not ours."""
    stored = (old.metadata.get("minattn", {}) if old is not None else {}).get("digest")
    return old is None or stored != digest(old)


def backup_path(path: Path, tag: str = "") -> Path:
    """A new <folder>/backups/<stem>[-<tag>]-<time>.ipynb for the notebook at `path`."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    stem = f"{path.stem}-{tag}" if tag else path.stem
    backup = path.parent / "backups" / f"{stem}-{stamp}.ipynb"
    n = 1
    while backup.exists():
        n += 1
        backup = backup.with_name(f"{stem}-{stamp}-{n}.ipynb")
    backup.parent.mkdir(parents=True, exist_ok=True)
    return backup


def write_notebook(notebook, path: Path) -> Path | None:
    """Write `notebook` to `path` (whole: a temporary file, renamed). A notebook already there
    that its reader edited or ran, a full run's replaced by a smoke one, or a finished run's
    by a failed one, is first copied to <folder>/backups/<stem>-<time>.ipynb; returns that
    copy (None when nothing was kept)."""
    import nbformat

    backup = None
    if path.exists():
        old = _read(path)
        new_meta = notebook.metadata.get("minattn", {})
        old_meta = old.metadata.get("minattn", {}) if old is not None else {}
        full_to_smoke = (new_meta.get("smoke", False) and "ok" in old_meta
                         and not old_meta.get("smoke"))
        ok_to_failed = old_meta.get("ok") and new_meta.get("ok") is False
        if edited(old) or full_to_smoke or ok_to_failed:
            backup = backup_path(path)
            shutil.copy2(path, backup)
            why = ("edited or run since it was written" if edited(old) else "a full run"
                   if full_to_smoke else "a run that finished, replaced by a failed one")
            print(f"  kept the earlier {_rel(path)} as {_rel(backup)} ({why})")
    notebook.metadata.setdefault("minattn", {})["digest"] = digest(notebook)
    write_whole(path, lambda tmp: nbformat.write(notebook, tmp))
    return backup


def save_run(notebook, ipynb: Path, page: Path, interrupted: bool,
             claims: Path | None = None) -> Path:
    """Write a lesson's executed notebook and its page, and move the claims its run recorded
    (<claims>.partial, written by `Lesson`) to `claims`; returns where the notebook went.

    The page is made first, beside the old one; a signal that came meanwhile (or before:
    `interrupted`) makes it an interrupted run, which replaces nothing already there: the
    notebook goes to backups/<stem>-interrupted-<time>.ipynb (without a page), and the previous
    notebook, page and claims stay as they were -- as does the index, which lists them. Only a
    run that finished moves its claims into place."""
    staged = page.with_name(f".{page.name}.staged")
    try:
        if not interrupted:
            export_html(notebook, staged)  # seconds for a long lesson: a signal may come
            interrupted = _STOP["signal"] is not None
        if interrupted:
            notebook.metadata["minattn"].update(ok=False, interrupted=True,
                                                error=f"interrupted ({_stop_name()})")
            if ipynb.exists():
                backup = backup_path(ipynb, "interrupted")
                write_notebook(notebook, backup)
                return backup
            export_html(notebook, staged)  # no previous run: this one is the page
        write_notebook(notebook, ipynb)
        os.replace(staged, page)
    finally:
        staged.unlink(missing_ok=True)
    partial = None if claims is None else claims.with_name(claims.name + ".partial")
    if partial is not None and notebook.metadata["minattn"].get("ok") and partial.exists():
        os.replace(partial, claims)
    return ipynb


def build_notebooks(out_dir: Path, lessons: list[Path]) -> list[Path]:
    """Each lesson as <out_dir>/<stem>.ipynb with jupytext (outputs empty); a notebook already
    there that holds outputs or edits is kept as it is."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for lesson in lessons:
        path = out_dir / f"{lesson.stem}.ipynb"
        old = _read(path) if path.exists() else None
        ran = old is not None and any(c.get("outputs") for c in old.cells)
        if path.exists() and (ran or edited(old)):  # a run by `make course` is unedited: kept
            print(f"kept {_rel(path)}: it holds {'outputs' if ran else 'edits'} (move it away "
                  "for a blank one)")
            continue
        write_notebook(lesson_notebook(lesson), path)
        written.append(path)
        print(f"notebook {_rel(path)}")
    return written


# ============================================================================ executing one lesson
@dataclass
class LessonRun:
    lesson: Path
    notebook: Path
    html: Path
    ok: bool
    seconds: float
    error: str = ""
    prose_misses: tuple = ()  # approximate numbers in the markdown that this run did not print
    interrupted: bool = False  # by a SIGINT or SIGTERM: nothing of this lesson was replaced


def run_notebook(lesson: Path, env: dict, timeout: int = CELL_TIMEOUT,
                 progress: bool = True) -> tuple:
    """(the executed notebook, '' or the error that stopped it): `lesson` run once through a
    Jupyter kernel, from the repository root, with `env` (MINATTN_RUNNER=1 added: the kernel's
    Lesson leaves its claims for `save_run` to move into place), over IPC (no TCP port). With
    `progress`, the kernel's printed text and progress bars are echoed to the terminal as they
    come, and a line marks each finished cell.
    """
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    from traitlets.config import Config

    notebook = lesson_notebook(lesson)
    n_code = sum(c.cell_type == "code" for c in notebook.cells)
    start = time.perf_counter()
    done = 0

    class EchoingClient(NotebookClient):
        """Echoes the kernel's printed text (and its progress bars) to the terminal live; a
        SIGINT or SIGTERM stops the course (nbclient's own handler would kill the kernel,
        losing the cell's output, and the course would go on to the next lesson)."""

        async def async_start_new_kernel(self, **kwargs):
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):  # in place of nbclient's
                with contextlib.suppress(RuntimeError, NotImplementedError):
                    loop.add_signal_handler(sig, _on_signal, sig)
            return await super().async_start_new_kernel(**kwargs)

        def process_message(self, msg, cell, cell_index):
            if progress and msg["msg_type"] == "stream":
                stream = sys.stdout if msg["content"]["name"] == "stdout" else sys.stderr
                stream.write(msg["content"]["text"])
                stream.flush()
            return super().process_message(msg, cell, cell_index)

    def on_notebook_start(notebook):
        """The kernel is ready: a signal from now on interrupts its running cell."""
        _STOP["kernel"] = getattr(client.km.provisioner, "pid", None)  # in its own session

    def on_cell_start(cell, cell_index):
        if _STOP["signal"]:  # came while the kernel started, or between two cells
            raise Stopped(_stop_name())

    def on_cell_executed(cell, cell_index, execute_reply):
        nonlocal done
        if cell.cell_type != "code":
            return
        done += 1
        if progress:
            figures = sum("image/png" in o.get("data", {}) for o in cell.get("outputs", []))
            print(f"  -- {lesson.stem}: cell {done}/{n_code}"
                  + (f", {figures} figure(s)" if figures else "")
                  + f", {time.perf_counter() - start:.0f} s", flush=True)

    # IPC sockets in a folder of this run's own (an absolute path: the kernel's working
    # directory is the repository root, not necessarily ours)
    sockets = tempfile.mkdtemp(prefix="minattn-kernel-")
    # the kernel is ended at once after its last cell (its outputs, figures and claims are all
    # written by then): a graceful exit tears down torch's modules, about a second a lesson
    client = EchoingClient(notebook, timeout=timeout, kernel_name="python3",
                           shutdown_kernel="immediate",
                           resources={"metadata": {"path": str(REPO_ROOT)}},
                           on_cell_executed=on_cell_executed,
                           on_notebook_start=on_notebook_start, on_cell_start=on_cell_start,
                           config=Config(KernelManager={"transport": "ipc",
                                                        "ip": f"{sockets}/kernel"}))
    error = ""
    try:
        kernel_env = dict(os.environ if env is None else env, MINATTN_RUNNER="1")
        kernel_env.pop("MPLBACKEND", None)  # e.g. Agg would hide the figures: use the inline one
        kernel_env["PYTHONWARNINGS"] = ",".join(
            w for w in (kernel_env.get("PYTHONWARNINGS"), KERNEL_WARNINGS) if w)
        client.execute(env=kernel_env)
    except CellExecutionError as exc:
        error = str(exc).strip().splitlines()[-1] if str(exc).strip() else repr(exc)
    except Exception as exc:  # a dead kernel, a timeout, Stopped: still write what ran
        error = f"{type(exc).__name__}: {exc}"
    finally:
        _STOP["kernel"] = None
        shutil.rmtree(sockets, ignore_errors=True)
        if _STOP["catching"]:
            _catch_signals()  # nbclient put back the default handlers
    return notebook, ANSI.sub("", error)


def execute_lesson(lesson: Path, out_dir: Path, env: dict | None = None,
                   timeout: int = CELL_TIMEOUT, progress: bool = True) -> LessonRun:
    """Execute `lesson` once as a notebook; write <out_dir>/<stem>.ipynb and .html, and move
    the claims the run recorded into place.

    The kernel runs from the repository root with `env` (default: this process's environment),
    over IPC (no TCP port). On a failing cell the notebook is still written, with the error in
    it, and ok is False (the claims stay those of the last run that finished). A SIGINT or
    SIGTERM at any moment interrupts the running cell and replaces nothing (`save_run`).
    """
    env = dict(os.environ if env is None else env)
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    notebook, error = run_notebook(lesson, env, timeout, progress)
    interrupted = _STOP["signal"] is not None
    seconds = time.perf_counter() - start
    tidy_notebook(notebook, REPO_ROOT)
    smoke = settings(env).smoke
    misses = () if smoke or interrupted else approximate_misses(lesson, notebook)
    notebook.metadata["minattn"] = {"seconds": round(seconds, 1), "ok": not error,
                                    "smoke": smoke, "error": error,
                                    "prose_misses": [m.text for m in misses]}
    ipynb, page = out_dir / f"{lesson.stem}.ipynb", out_dir / f"{lesson.stem}.html"
    claims = Path(env.get("MINATTN_FIGURES") or figure_root(smoke)) / lesson.stem / "claims.json"
    written = save_run(notebook, ipynb, page, interrupted, claims)
    interrupted = notebook.metadata["minattn"].get("interrupted", False)
    error = notebook.metadata["minattn"]["error"]
    return LessonRun(lesson, written, page, not error, seconds, error, misses, interrupted)


def approximate_misses(lesson: Path, notebook) -> tuple:
    """The "about X" numbers of the lesson's markdown that its full-mode output does not
    support to within 5 % (the exact ones are checked against every smoke run by the tests)."""
    from .prose import unsupported

    return tuple(s for s in unsupported(lesson, printed_text(notebook), check_approx=True)
                 if s.approx)


# ============================================================================ the class's pages
CLASS_ABOUT = ("<p><b>The class's pages.</b> Every listing of the library shows the exercises "
               "as your copy holds them: <code>raise NotImplementedError(...)</code> between "
               "the markers, for you to write.</p>")


def class_pages(source: Path, dest: Path) -> Path:
    """The build in `source` as a class may see it, in `dest` (notebooks, pages, index): see
    the module docstring. Returns the index."""
    import nbformat

    from .pages import class_notebook, lesson_pages

    notebooks = lesson_pages(source)
    if not notebooks:
        raise ValueError(f"no lesson notebook in {_rel(source)}: build the course first "
                         "(make course, or make smoke and DIR=notebooks-smoke)")
    dest.mkdir(parents=True, exist_ok=True)
    smoke = False
    for ipynb in notebooks:
        notebook = nbformat.read(ipynb, as_version=4)
        class_notebook(notebook)
        meta = notebook.metadata.setdefault("minattn", {})
        meta["class"] = True
        smoke |= bool(meta.get("smoke"))
        write_notebook(notebook, dest / ipynb.name)
        export_html(notebook, dest / f"{ipynb.stem}.html")
    # the claims table, without a link to the report: the folder is shared on its own
    return write_index(dest, None, claims_html(collect_claims(figure_root(smoke))), RULE,
                       about=CLASS_ABOUT)


# ============================================================================ main
# The first SIGINT or SIGTERM of a run (a number), the running kernel's pid (None between two
# lessons' kernels), whether main's handlers are in place.
_STOP = {"signal": None, "kernel": None, "catching": False}


class Stopped(Exception):
    """A signal came while a lesson's kernel started or between two of its cells."""


def _stop_name() -> str:
    return signal.Signals(_STOP["signal"]).name if _STOP["signal"] else ""


def _on_signal(signum, frame=None) -> None:
    """SIGINT or SIGTERM, at any moment of a run: the running cell is interrupted (its output
    kept), nothing of the lesson is replaced, and the course stops. A second one kills the
    kernel (a cell in C code may not see the interrupt), or stops at once between kernels."""
    again = _STOP["signal"] is not None
    _STOP["signal"] = _STOP["signal"] or signum
    name = signal.Signals(signum).name
    pid = _STOP["kernel"]
    print(f"\n{name}: " + ("stopping now" if again else f"stopping ({name} again: at once)"),
          file=sys.stderr, flush=True)
    if pid:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL if again else signal.SIGINT)
    elif again:
        raise KeyboardInterrupt


def _catch_signals() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _on_signal)


def figure_root(smoke: bool | None = None) -> Path:
    """Where the lessons' figures and claims go: MINATTN_FIGURES, else figures/ (figures-smoke/
    for a smoke run, so that it never replaces a full run's claims)."""
    smoke = settings().smoke if smoke is None else smoke
    default = REPO_ROOT / ("figures-smoke" if smoke else "figures")
    return Path(os.environ.get("MINATTN_FIGURES") or default)


def run_lessons(lessons: list[Path], out_dir: Path, env: dict) -> list[LessonRun]:
    """Execute the lessons one after another until they are done or a signal came."""
    runs = []
    for lesson in lessons:
        if _STOP["signal"]:
            break
        print(f"\n=== {lesson.name} (as a notebook) " + "=" * max(0, 48 - len(lesson.name)),
              flush=True)
        run = execute_lesson(lesson, out_dir, env=env)
        runs.append(run)
        if run.interrupted:
            break
        pages = _rel(run.notebook) + (f", {_rel(run.html)}" if run.notebook.parent
                                      == run.html.parent else "")
        print(f"  {'ok' if run.ok else 'FAILED: ' + run.error} in {run.seconds:.0f} s -> "
              f"{pages}", flush=True)
        for miss in run.prose_misses:
            print(f"  warning: the text says about {miss.text}, which this run did not "
                  f"print (…{miss.context}…)")
    return runs


def main(argv: list[str] | None = None) -> int:
    try:
        smoke = settings().smoke  # every MINATTN_* value, checked before anything is written
    except SettingsError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notebooks-only", action="store_true",
                        help="write unexecuted notebooks (never over one that holds outputs or "
                             "edits) and stop")
    parser.add_argument("--only", nargs="*", default=None, help="lesson numbers, e.g. 01 02")
    parser.add_argument("--out", default=None,
                        help="notebook folder (default notebooks/, notebooks-smoke/ in smoke mode)")
    parser.add_argument("--class-pages", action="store_true",
                        help="copy the build in the notebook folder to <folder>-class/ with every "
                             "library listing showing the exercises as stubs (the pages to share "
                             "with a class), and stop")
    args = parser.parse_args(argv)

    lessons = lesson_files()
    if args.only:
        lessons = [p for p in lessons if p.name[:2] in args.only]
    default_out = "notebooks-smoke" if smoke and not args.notebooks_only else "notebooks"
    out_dir = Path(args.out) if args.out else REPO_ROOT / default_out
    if args.notebooks_only:
        build_notebooks(out_dir, lessons)
        return 0
    if args.class_pages:
        dest = out_dir.with_name(out_dir.name + "-class")
        try:
            index = class_pages(out_dir, dest)
        except ValueError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        print(f"the class's pages: {_rel(index)} (every listing of the library shows the "
              f"exercises as stubs). Share {_rel(dest)}/, not {_rel(out_dir)}/: its pages show "
              "the solutions.")
        return 0

    figures = figure_root(smoke)
    env = dict(os.environ, MINATTN_FIGURES=str(figures))
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    _STOP.update(signal=None, kernel=None, catching=True)
    _catch_signals()
    runs = []
    try:
        runs = run_lessons(lessons, out_dir, env)
        if not _STOP["signal"] or any(not r.interrupted for r in runs):
            # the index and report of what is there now (every lesson's latest claims)
            report, text = write_report(figures)
            index = write_index(out_dir, report, claims_html(collect_claims(figures)), RULE)
    except KeyboardInterrupt:  # a second signal between two kernels: at once
        _STOP["signal"] = _STOP["signal"] or signal.SIGINT
    finally:
        _STOP["catching"] = False
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if _STOP["signal"]:
        print(stopped_line(runs, lessons), file=sys.stderr)
        code, _STOP["signal"] = 128 + _STOP["signal"], None
        return code

    print("\n" + text)
    print(f"report: {_rel(report)}    course: {_rel(index)}")
    if smoke:
        print("smoke mode: tiny sizes, so the numbers are not the lessons' results and the "
              "outcomes test nothing; `make course` runs the lessons in full")
    print("\n| lesson | result | time |\n|---|---|---|")
    for run in runs:
        print(f"| {run.lesson.name} | {'ok' if run.ok else 'FAILED: ' + run.error} | "
              f"{run.seconds:.0f} s |")
    return 0 if all(run.ok for run in runs) else 1


def stopped_line(runs: list[LessonRun], lessons: list[Path]) -> str:
    """The one line a run stopped by a signal ends with: which lessons finished, what was kept."""
    finished = [r.lesson.stem for r in runs if not r.interrupted]
    line = (f"interrupted ({_stop_name()}): {len(finished)} of {len(lessons)} lessons finished "
            f"({' '.join(finished) or 'none'})")
    for run in runs:
        if run.interrupted and run.notebook.parent.name == "backups":
            line += (f"; what ran of {run.lesson.stem} is in {_rel(run.notebook)}, its "
                     "previous notebook, page and claims are kept")
        elif run.interrupted:
            line += f"; what ran of {run.lesson.stem} is its page (it had none before)"
    return line


if __name__ == "__main__":
    sys.exit(main())
