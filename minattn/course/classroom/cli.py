"""The teacher's and the student's command: `python -m minattn.course.classroom COMMAND`.

    python -m minattn.course.classroom list                     # exercises per lesson, kind, time
    python -m minattn.course.classroom student DIR  # a student copy, every solution removed
    python -m minattn.course.classroom student DIR --only 1 2.1 # hand out lesson 1 and exercise 2.1
    python -m minattn.course.classroom check [ID...] [-v]       # in a copy: which exercises pass
    python -m minattn.course.classroom grade SUB... --only 1.1
        # teacher: the gradebook (grades.csv; after a Ctrl-C, --resume grades the rest)
    python -m minattn.course.classroom audit                    # does a copy give an answer away?

Student copies: copies.py. The check: check.py. Grading (grading.py) splices each
submission's region bodies, and nothing else, into a copy of the teacher's library and runs
the teacher's tests, hidden ones included, with the submission's functions in a sandboxed
process of their own (plugin.py, client.py, worker.py, protocol.py, sandbox.py). audit.py
checks the exercises themselves (nothing in a copy gives one away).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import REPO_ROOT
from ..checkout import checkout_of
from .audit import audit
from .check import check, exit_on_signals
from .copies import TOOL, make_student_copy
from .grading import grade
from .regions import all_exercises, by_id, lesson_of, summary


def print_list(root: Path = REPO_ROOT) -> None:
    groups = by_id(all_exercises(root))
    lesson = None
    for ex_id, regions in groups.items():
        if lesson_of(ex_id, root) != lesson:
            lesson = lesson_of(ex_id, root)
            print(f"\n{lesson}")
        s = summary(regions)
        time = f"~{s.minutes} min" if s.minutes else ""
        where = f"{s.path}:{s.line}" + (f" (+{len(regions) - 1} more)" if len(regions) > 1 else "")
        print(f"  {ex_id:6}{s.kind:11}{time:9}{s.what}  [{where}]")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=f"python -m {TOOL}",
        description="The classroom: student copies, the check, grading, the audit.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="every exercise, per lesson, with its kind and time")
    p = sub.add_parser("student", help="build a student copy")
    p.add_argument("dest", type=Path)
    p.add_argument("--only", nargs="+", default=None, metavar="ID",
                   help="hand out only these exercises (ids, or a lesson number: --only 1)")
    p.add_argument("--force", action="store_true",
                   help="rebuild an existing student copy (the student's work in exercises "
                        "handed out again stays in place; edited files are backed up)")
    p.add_argument("--reset", action="store_true",
                   help="with --force: stub the exercises again, even where the student wrote code")
    p = sub.add_parser("check", help="in a copy: which exercises pass (a table, last)")
    p.add_argument("ids", nargs="*", metavar="ID", help="exercise ids or lesson numbers")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="show pytest's output and tracebacks")
    p.add_argument("--timeout", type=float, default=900,
                   help="seconds for the whole check (default 900); then everything it "
                        "started ends")
    p = sub.add_parser("grade", help="grade submissions in a sandbox against every test, "
                                      "hidden ones included")
    p.add_argument("submissions", nargs="+", type=Path)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--only", nargs="+", default=None, metavar="ID",
                       help="the exercises handed out (ids or lesson numbers)")
    which.add_argument("--roster", type=Path, default=None,
                       help="a file listing the exercises handed out (ids or lesson numbers)")
    p.add_argument("--out", type=Path, default=Path("grades.csv"))
    p.add_argument("--name", nargs="+", default=None, metavar="NAME",
                   help="gradebook names, one per submission (default: each path relative to "
                        "the submissions' common folder)")
    p.add_argument("--timeout", type=float, default=600, help="seconds per submission")
    p.add_argument("--resume", action="store_true",
                   help="keep the submissions the gradebook (--out) grades in full, grade only "
                        "the others (after an interrupted grading)")
    p.add_argument("--hide", nargs="+", default=(), type=Path, metavar="FOLDER",
                   help="folders to hide although the sandbox shows what holds them (it shows "
                        "only the system, the Python environment and the graded copy, and "
                        "warns of any copy of the course it can still see)")
    p.add_argument("--unsafe-no-sandbox", action="store_true",
                   help="grade without bubblewrap (see the warning it prints)")
    sub.add_parser("audit", help="list what would give an exercise's answer away in a student copy")
    args = parser.parse_args(argv)

    try:
        if args.command == "list":
            print_list()
        elif args.command == "student":
            if args.reset and not args.force:
                raise ValueError("--reset only applies to a rebuild (--force)")
            removed = make_student_copy(args.dest, only=args.only, force=args.force,
                                        reset=args.reset)
            ids = list(by_id(removed))
            print(f"student copy in {args.dest}: {len(ids)} exercise{'s' * (len(ids) != 1)} "
                  f"({' '.join(ids)}), {len(removed)} region{'s' * (len(removed) != 1)} removed")
            print(f"Students: cd {args.dest} && make setup && make exercises")
        elif args.command == "check":
            here = checkout_of(Path.cwd())
            if here is not None and here != REPO_ROOT.resolve():  # the console script of
                raise ValueError(  # another copy's environment: it would check that copy
                    f"this folder belongs to {here}, but `import minattn` found "
                    f"{REPO_ROOT.resolve() / 'minattn'} (another copy of the course), whose "
                    f"exercises the check would test. Check this copy with its own: cd {here} "
                    "&& make exercises")
            exit_on_signals()
            return check(args.ids, args.verbose, timeout=args.timeout or None)
        elif args.command == "grade":
            exit_on_signals()
            grade(args.submissions, args.out, args.only, args.timeout, roster=args.roster,
                  names=args.name, unsafe=args.unsafe_no_sandbox, hide=args.hide,
                  resume=args.resume)
        elif args.command == "audit":
            problems = audit()
            print("\n".join(problems) or "no give-away found")
            return 1 if problems else 0
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: everything it started has ended (check.run_pytest)
        print("\ninterrupted", file=sys.stderr)
        return 130
    return 0
