"""Run the course: build every notebook, then run every lesson as a script.

    python -m minattn.course                 # notebooks + every lesson (full mode)
    python -m minattn.course --notebooks-only
    python -m minattn.course --only 01 03    # just these lessons
    MINATTN_SMOKE=1 python -m minattn.course # every lesson in smoke mode (seconds each)

Notebooks are generated with jupytext into notebooks/ (not committed: lessons/*.py are the
source). Each lesson runs in its own process, from the repository root, and prints its results;
a summary table of run times closes the run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from . import REPO_ROOT


def lesson_files(root: Path = REPO_ROOT) -> list[Path]:
    """lessons/NN_topic.py, in order."""
    return sorted((root / "lessons").glob("[0-9][0-9]_*.py"))


def build_notebooks(out_dir: Path, lessons: list[Path]) -> list[Path]:
    """Convert each lesson to <out_dir>/<stem>.ipynb with jupytext (outputs empty)."""
    import jupytext

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for lesson in lessons:
        notebook = jupytext.read(lesson)
        notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                           "language": "python"}
        path = out_dir / f"{lesson.stem}.ipynb"
        jupytext.write(notebook, path)
        written.append(path)
        print(f"notebook {path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path}")
    return written


def run_lesson(lesson: Path) -> tuple[int, float]:
    """Run one lesson as a script from the repository root; returns (exit code, seconds)."""
    start = time.perf_counter()
    print(f"\n=== {lesson.name} " + "=" * max(0, 60 - len(lesson.name)), flush=True)
    proc = subprocess.run([sys.executable, str(lesson)], cwd=REPO_ROOT, env=os.environ.copy())
    return proc.returncode, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notebooks-only", action="store_true")
    parser.add_argument("--only", nargs="*", default=None, help="lesson numbers, e.g. 01 02")
    args = parser.parse_args(argv)

    lessons = lesson_files()
    if args.only:
        lessons = [p for p in lessons if p.name[:2] in args.only]
    build_notebooks(REPO_ROOT / "notebooks", lessons)
    if args.notebooks_only:
        return 0

    results = [(lesson.name, *run_lesson(lesson)) for lesson in lessons]
    print("\n| lesson | result | time |\n|---|---|---|")
    for name, code, seconds in results:
        print(f"| {name} | {'ok' if code == 0 else f'FAILED ({code})'} | {seconds:.0f} s |")
    return 0 if all(code == 0 for _, code, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
