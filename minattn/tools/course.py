"""Run the course: execute every lesson once as a notebook, export it, and report.

    python -m minattn.tools.course                  # every lesson, full mode
    python -m minattn.tools.course --only 01 03     # just these lessons
    MINATTN_SMOKE=1 python -m minattn.tools.course  # every lesson in smoke mode (seconds each)
    python -m minattn.tools.course --notebooks-only # unexecuted notebooks, to run yourself

Each lesson (lessons/NN_x.py, jupytext percent format) becomes notebooks/NN_x.ipynb and is
executed ONCE through a Jupyter kernel (nbclient), from the repository root, with this
process's environment (so MINATTN_SMOKE and friends apply). The executed notebook keeps its
printed results and inline figures; notebooks/NN_x.html is a static copy with the images
embedded; notebooks/index.html lists the lessons with their run times. Figures still go to
figures/<lesson>/. Every paper claim a lesson records (`Lesson.claim`) is collected into one
table, printed and written to figures/REPORT.md. A failing lesson is kept (with its error
shown in the notebook) and makes the run exit non-zero; the other lessons still run.
"""

from __future__ import annotations

import argparse
import html
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from . import REPO_ROOT
from .report import collect_claims, write_report
from .verdict import RULE

CELL_TIMEOUT = 1800  # seconds one cell may run (full-mode training cells take minutes on CPU)


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


def build_notebooks(out_dir: Path, lessons: list[Path]) -> list[Path]:
    """Convert each lesson to <out_dir>/<stem>.ipynb with jupytext (outputs empty)."""
    import nbformat

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for lesson in lessons:
        path = out_dir / f"{lesson.stem}.ipynb"
        nbformat.write(lesson_notebook(lesson), path)
        written.append(path)
        print(f"notebook {_rel(path)}")
    return written


def summary_line(lesson: Path) -> tuple[str, str]:
    """(title, one-line summary) from the lesson's '# ' heading: "Lesson 01 — Scaled
    dot-product attention" gives ("Lesson 01", "Scaled dot-product attention"). Without a dash,
    the summary is the first sentence of the first markdown cell."""
    notebook = lesson_notebook(lesson)
    text = next((c.source for c in notebook.cells if c.cell_type == "markdown"), "")
    lines = text.splitlines()
    heading = next((h.lstrip("# ").strip() for h in lines if h.startswith("# ")), lesson.stem)
    title, dash, summary = heading.partition(" — ")
    if not dash:
        body = " ".join(t.strip() for t in lines if t.strip() and not t.startswith("#"))
        summary = re.split(r"(?<=[.!?])\s", body, maxsplit=1)[0] if body else ""
    return title.strip(), re.sub(r"[*`]", "", summary).strip()


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


_CARRIAGE_RETURN = re.compile(r"[^\n]*\r(?=[^\n])")  # text a later '\r' overwrote (tqdm bars)


def tidy_streams(notebook) -> None:
    """Merge consecutive stream outputs and keep only the last state of each progress bar
    (what a browser would show), so the notebook and its HTML stay small and readable."""
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        merged = []
        for out in cell.get("outputs", []):
            if (out.output_type == "stream" and merged and merged[-1].output_type == "stream"
                    and merged[-1].name == out.name):
                merged[-1].text += out.text
            else:
                merged.append(out)
        for out in merged:
            if out.output_type == "stream":
                out.text = _CARRIAGE_RETURN.sub("", out.text.replace("\r\n", "\n"))
        cell.outputs = merged


MATHJAX_CONFIG = "MathJax.js?config=TeX-AMS-MML_HTMLorMML-full,Safe"


def local_mathjax(out_dir: Path) -> str | None:
    """Unpack MathJax (fetched by data_scripts/mathjax.py) into <out_dir>/mathjax once and return
    the pages' relative URL for it; None when it was not fetched (the pages then use the CDN)."""
    import zipfile

    from .fetch import data_root

    wheel = data_root() / "mathjax" / "mathjax.whl"
    target = out_dir / "mathjax"
    if not (target / "MathJax.js").exists():
        if not wheel.exists():
            return None
        prefix = "jupyter_server_mathjax/static/"
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.namelist():
                if member.startswith(prefix) and not member.endswith("/"):
                    dest = target / member[len(prefix):]
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    dest.write_bytes(archive.read(member))
    return f"mathjax/{MATHJAX_CONFIG}"


def export_html(notebook, path: Path) -> None:
    """A static HTML copy of an executed notebook, figures embedded as data: URIs, equations
    typeset by a local MathJax when one was fetched (offline reading), else by the CDN's."""
    from nbconvert import HTMLExporter

    mathjax = local_mathjax(path.parent)
    exporter = HTMLExporter(embed_images=True, **({"mathjax_url": mathjax} if mathjax else {}))
    body, _ = exporter.from_notebook_node(notebook)
    # The template also loads require.js from a CDN, for interactive widgets; our pages have
    # none, and an offline reader's browser would only wait for it.
    body = body.replace(f'<script src="{exporter.require_js_url}"></script>', "", 1)
    path.write_text(body, encoding="utf-8")


def execute_lesson(lesson: Path, out_dir: Path, env: dict | None = None,
                   timeout: int = CELL_TIMEOUT, progress: bool = True) -> LessonRun:
    """Execute `lesson` once as a notebook; write <out_dir>/<stem>.ipynb and .html.

    The kernel runs from the repository root with `env` (default: this process's environment).
    On a failing cell the notebook is still written, with the error in it, and ok is False.
    With `progress`, the kernel's printed text and progress bars are echoed to the terminal as
    they come, and a line marks each finished cell.
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    out_dir.mkdir(parents=True, exist_ok=True)
    notebook = lesson_notebook(lesson)
    n_code = sum(c.cell_type == "code" for c in notebook.cells)
    start = time.perf_counter()
    done = 0

    class EchoingClient(NotebookClient):
        """Echoes the kernel's printed text (and its progress bars) to the terminal live."""

        def process_message(self, msg, cell, cell_index):
            if progress and msg["msg_type"] == "stream":
                stream = sys.stdout if msg["content"]["name"] == "stdout" else sys.stderr
                stream.write(msg["content"]["text"])
                stream.flush()
            return super().process_message(msg, cell, cell_index)

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

    client = EchoingClient(notebook, timeout=timeout, kernel_name="python3",
                           resources={"metadata": {"path": str(REPO_ROOT)}},
                           on_cell_executed=on_cell_executed)
    error = ""
    try:
        kernel_env = dict(os.environ if env is None else env)
        kernel_env.pop("MPLBACKEND", None)  # e.g. Agg would hide the figures: use the inline one
        client.execute(env=kernel_env)
    except CellExecutionError as exc:
        error = str(exc).strip().splitlines()[-1] if str(exc).strip() else repr(exc)
    except Exception as exc:  # a dead kernel, a timeout: still write what ran
        error = f"{type(exc).__name__}: {exc}"
    seconds = time.perf_counter() - start
    tidy_streams(notebook)
    notebook.metadata["minattn"] = {"seconds": round(seconds, 1), "ok": not error,
                                    "smoke": _smoke(env)}
    ipynb, page = out_dir / f"{lesson.stem}.ipynb", out_dir / f"{lesson.stem}.html"
    nbformat.write(notebook, ipynb)
    export_html(notebook, page)
    return LessonRun(lesson, ipynb, page, not error, seconds, error,
                     () if _smoke(env) else approximate_misses(lesson, notebook))


def approximate_misses(lesson: Path, notebook) -> tuple:
    """The "about X" numbers of the lesson's markdown that its full-mode output does not
    support to within 5 % (the exact ones are checked against every smoke run by the tests)."""
    from .prose import unsupported

    printed = "\n".join(o.get("text", "") for c in notebook.cells if c.cell_type == "code"
                        for o in c.get("outputs", []) if o.output_type == "stream")
    return tuple(s for s in unsupported(lesson, printed, check_approx=True) if s.approx)


def _smoke(env: dict | None) -> bool:
    value = (os.environ if env is None else env).get("MINATTN_SMOKE", "")
    return value.strip().lower() not in ("", "0", "false", "no")


# ============================================================================ index.html
def write_index(out_dir: Path, runs: list[LessonRun], report: Path | None,
                claims: list[dict]) -> Path:
    """notebooks/index.html: the lessons (title, summary, run time, links) and the report."""
    esc = html.escape
    rows = []
    for run in runs:
        title, summary = summary_line(run.lesson)
        state = "" if run.ok else f' <b class="fail">FAILED: {esc(run.error)}</b>'
        if run.prose_misses:
            state += (' <b class="fail">the text says about ' +
                      ", ".join(esc(m.text) for m in run.prose_misses) +
                      ", which this run did not print</b>")
        rows.append(f'<tr><td><a href="{esc(run.html.name)}">{esc(title)}</a> — '
                    f'<span class="sum">{esc(summary)}</span>{state}</td>'
                    f'<td>{run.seconds:.0f} s</td><td><a href="{esc(run.notebook.name)}">.ipynb</a>'
                    f'</td></tr>')
    mode = ("in smoke mode: tiny sizes, so the numbers are not the lessons' results"
            if _smoke(None) else "in full mode")
    claim_rows = "".join(
        "<tr>" + "".join(f"<td>{esc(c[k])}</td>" for k in ("lesson", "claim", "paper")) +
        f"<td>{esc(c['ours'])}{' (smoke)' if c['smoke'] else ''}</td>"
        f"<td><b>{esc(c['outcome'] or '(none)')}</b><br>"
        f"{esc(c['finding'])}<br><small>runs per arm: {esc(c['n'])}; {esc(c['detail'])}"
        "</small></td>"
        f"<td>{esc(c['why'])}</td></tr>"
        for c in claims)
    link = esc(os.path.relpath(report, out_dir)) if report else ""
    report_link = (f'<p>The same table as Markdown: <a href="{link}">{esc(_rel(report))}</a>.</p>'
                   if report else "")
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>minattn — the course</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto;line-height:1.4}}
table{{border-collapse:collapse;width:100%}}td,th{{border-bottom:1px solid #ddd;padding:.4em;
vertical-align:top;text-align:left}}.sum{{color:#444}}.fail{{color:#b00}}</style></head><body>
<h1>minattn — attention mechanisms from scratch</h1>
<p>Each lesson below was executed once by <code>make course</code>, {esc(mode)}. Its page shows
the code, the printed results and the figures. The <code>.ipynb</code> is the same notebook, to
open in Jupyter (<code>make lab</code>) and run yourself.</p>
<table><tr><th>lesson</th><th>run time</th><th>notebook</th></tr>
{chr(10).join(rows)}
</table>
<h2>Paper claims, ours beside the paper's</h2>
<p>{esc(RULE)}</p>
<table><tr><th>lesson</th><th>claim</th><th>paper</th><th>ours</th><th>outcome</th>
<th>why they differ</th></tr>
{claim_rows or '<tr><td colspan="6">No lesson recorded a claim.</td></tr>'}
</table>
{report_link}
</body></html>
"""
    path = out_dir / "index.html"
    path.write_text(page, encoding="utf-8")
    return path


# ============================================================================ main
def figure_root() -> Path:
    return Path(os.environ.get("MINATTN_FIGURES") or (REPO_ROOT / "figures"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notebooks-only", action="store_true",
                        help="write unexecuted notebooks and stop")
    parser.add_argument("--only", nargs="*", default=None, help="lesson numbers, e.g. 01 02")
    parser.add_argument("--out", default=str(REPO_ROOT / "notebooks"), help="notebook folder")
    args = parser.parse_args(argv)

    lessons = lesson_files()
    if args.only:
        lessons = [p for p in lessons if p.name[:2] in args.only]
    out_dir = Path(args.out)
    if args.notebooks_only:
        build_notebooks(out_dir, lessons)
        return 0

    runs = []
    for lesson in lessons:
        print(f"\n=== {lesson.name} (as a notebook) " + "=" * max(0, 48 - len(lesson.name)),
              flush=True)
        run = execute_lesson(lesson, out_dir)
        print(f"  {'ok' if run.ok else 'FAILED: ' + run.error} in {run.seconds:.0f} s -> "
              f"{_rel(run.notebook)}, {_rel(run.html)}", flush=True)
        for miss in run.prose_misses:
            print(f"  warning: the text says about {miss.text}, which this run did not print "
                  f"(…{miss.context}…)")
        runs.append(run)

    report, text = write_report(figure_root())  # every lesson's latest claims, not just these
    claims = collect_claims(figure_root())
    index = write_index(out_dir, runs, report, claims)
    print("\n" + text)
    print(f"report: {_rel(report)}    course: {_rel(index)}")
    print("\n| lesson | result | time |\n|---|---|---|")
    for run in runs:
        print(f"| {run.lesson.name} | {'ok' if run.ok else 'FAILED: ' + run.error} | "
              f"{run.seconds:.0f} s |")
    return 0 if all(run.ok for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
