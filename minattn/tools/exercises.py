"""Classroom exercises: build a student copy of the course and report which exercises pass.

In the library, a solution is a region of code between a comment line
`# BEGIN EXERCISE <id> <what to implement>` and a comment line `# END EXERCISE`
(see `softmax_np` in minattn/attention.py).

    python -m minattn.exercises list               # every exercise, where it lives
    python -m minattn.exercises student DIR        # a student copy of the repo in DIR
    python -m minattn.exercises student DIR --only 1.1 1.2   # remove just these

In the student copy each region's body becomes
    raise NotImplementedError("Exercise 1.1: numerically stable (masked) softmax ...")
and the markers stay, so the student knows where to write. Tests tied to an exercise carry
`@pytest.mark.exercise("1.1")`; `pytest --exercises` in the copy runs those tests and prints a
table of which exercises pass (`pytest --exercises 1.2` for one exercise). Exercises build on
each other (attention uses the softmax): a table line says which exercise is still in the way.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from . import REPO_ROOT

BEGIN = re.compile(r"^(?P<indent>[ \t]*)# BEGIN EXERCISE (?P<id>\S+)\s*(?P<what>.*?)\s*$")
END = re.compile(r"^[ \t]*# END EXERCISE\s*$")

# What never goes into a student copy (environments, generated and fetched files).
IGNORED = (".git", ".venv", "__pycache__", "*.egg-info", ".pytest_cache", ".hypothesis",
           "figures", "notebooks", "student", "bench_results", "data", "build")


@dataclass(frozen=True)
class Exercise:
    id: str
    what: str
    path: Path
    line: int


def find_exercises(text: str, path: Path = Path("?")) -> list[Exercise]:
    """Every marked region of a source text; checks that markers pair up and ids are unique."""
    found, open_at = [], None
    for number, line in enumerate(text.splitlines(), start=1):
        if m := BEGIN.match(line):
            if open_at is not None:
                raise ValueError(f"{path}:{number}: BEGIN EXERCISE inside exercise "
                                 f"{open_at.id} (opened at line {open_at.line})")
            open_at = Exercise(m["id"], m["what"], path, number)
        elif END.match(line):
            if open_at is None:
                raise ValueError(f"{path}:{number}: END EXERCISE without a BEGIN")
            found.append(open_at)
            open_at = None
    if open_at is not None:
        raise ValueError(f"{path}:{open_at.line}: exercise {open_at.id} is never closed")
    return found


def strip_solutions(text: str, only: set[str] | None = None) -> str:
    """Replace each marked region's body with a NotImplementedError naming the exercise
    (only the exercises whose ids are in `only`, when given)."""
    out, inside = [], False
    for line in text.splitlines(keepends=True):
        if (m := BEGIN.match(line)) and (only is None or m["id"] in only):
            inside = True
            what = m["what"] or "see the docstring"
            message = f"Exercise {m['id']}: {what}".replace('"', "'")
            out += [line, f'{m["indent"]}raise NotImplementedError("{message}")\n']
        elif END.match(line) and inside:
            inside = False
            out.append(line)
        elif not inside:
            out.append(line)
    return "".join(out)


def all_exercises(root: Path = REPO_ROOT) -> list[Exercise]:
    exercises = []
    for path in sorted((root / "minattn").rglob("*.py")):
        exercises += find_exercises(path.read_text(), path.relative_to(root))
    # One id may mark several regions (a NumPy function and its torch twin, say): stripping the
    # exercise strips them all, so no twin left behind gives the answer away.
    return exercises


def make_student_copy(dest: Path, root: Path = REPO_ROOT,
                      only: set[str] | None = None) -> list[Exercise]:
    """Copy the repository to `dest` with the solutions removed (all, or those in `only`);
    returns the exercises removed."""
    dest = Path(dest).resolve()
    if dest == root.resolve() or root.resolve() in dest.parents and dest.name != "student":
        raise ValueError(f"student copy must go outside the repository (or to ./student), got {dest}")
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(root, dest, ignore=shutil.ignore_patterns(*IGNORED))
    exercises = all_exercises(root)
    if only is not None:
        unknown = set(only) - {e.id for e in exercises}
        if unknown:
            raise ValueError(f"unknown exercise ids {sorted(unknown)}; "
                             f"known: {[e.id for e in exercises]}")
        exercises = [e for e in exercises if e.id in only]
    for path in {e.path for e in exercises}:
        target = dest / path
        target.write_text(strip_solutions(target.read_text(), only))
    (dest / ".student-copy").write_text("This is a student copy: solutions were removed.\n")
    return exercises


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="classroom exercises")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list every exercise")
    student = sub.add_parser("student", help="build a student copy")
    student.add_argument("dest", type=Path)
    student.add_argument("--only", nargs="+", default=None,
                         help="remove only these exercises (hand them out one at a time)")
    args = parser.parse_args(argv)

    if args.command == "list":
        for e in all_exercises():
            print(f"{e.id:6} {e.path}:{e.line}  {e.what}")
        return 0
    exercises = make_student_copy(args.dest, only=set(args.only) if args.only else None)
    print(f"student copy in {args.dest} with {len(exercises)} exercises removed:")
    for e in exercises:
        print(f"  {e.id:6} {e.path}:{e.line}  {e.what}")
    print(f"\nStudents: cd {args.dest} && make exercises")
    return 0


if __name__ == "__main__":
    sys.exit(main())
