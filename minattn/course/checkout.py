"""What a lesson checks first (`Lesson(...)` calls `guard_lesson`): that it runs with its own
checkout's minattn, and that an unimplemented exercise stops it in one line.

- `check_checkout`: a lesson that imported another checkout's minattn (a teacher's copy, with
  its solutions, say) stops and says how to run it with its own.
- `install_exercise_stop`: an exercise's NotImplementedError ("Exercise 1.1: ...") ends the
  script, or the notebook cell, with one line naming the exercise, where it is and how to
  check it (`make exercises EX=1.1`) instead of a traceback.

Lessons load this module; the classroom (minattn/course/classroom/) is never imported by a lesson.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from . import REPO_ROOT


def checkout_of(path: Path) -> Path | None:
    """The checkout (a folder holding minattn/__init__.py) that `path` lies in, or None."""
    for folder in [Path(path).resolve(), *Path(path).resolve().parents]:
        if (folder / "minattn" / "__init__.py").is_file():
            return folder
    return None


def _ipython():
    if "IPython" not in sys.modules:
        return None
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


def check_checkout(root: Path = REPO_ROOT) -> None:
    """Stop a lesson that imported another checkout's minattn (a teacher's copy, say, with its
    solutions). The lesson's checkout is the script's folder or, in a notebook, the working
    directory."""
    shell = _ipython()
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    start = Path.cwd() if shell is not None or not main_file else Path(main_file).parent
    if shell is None and (not main_file or "site-packages" in Path(main_file).parts):
        return  # python -c, or a tool's entry point (pytest): not a lesson run
    lesson_root = checkout_of(start)
    if lesson_root is not None and lesson_root != Path(root).resolve():
        raise SystemExit(
            f"This lesson belongs to {lesson_root}, but `import minattn` found "
            f"{Path(root).resolve() / 'minattn'} (another copy of the course). Run it with this "
            f"copy's minattn: cd {lesson_root} && PYTHONPATH=. <python> lessons/..., "
            "or `make setup` in this copy first.")


def exercise_stop(exc: BaseException, tb, root: Path = REPO_ROOT) -> str | None:
    """One line for an exercise's NotImplementedError: which exercise, where, how to check it.
    None for any other exception."""
    if not isinstance(exc, NotImplementedError):
        return None
    m = re.match(r"Exercise (\S+): (.*)", str(exc))
    if m is None:
        return None
    where, code, line = "", None, 0
    while tb is not None:
        code, line = tb.tb_frame.f_code, tb.tb_lineno
        tb = tb.tb_next
    if line:
        path = Path(code.co_filename)
        path = path.relative_to(root) if path.is_relative_to(root) else path
        where = f" ({code.co_name} in {path}:{line})"
    return (f"Exercise {m[1]} is not implemented yet{where}: {m[2]}. "
            f"Implement it, then check it with: make exercises EX={m[1]}")


def install_exercise_stop(root: Path = REPO_ROOT) -> None:
    """In a lesson, an unimplemented exercise stops the script (or the notebook cell) with one
    line instead of a traceback."""
    shell = _ipython()
    if shell is not None and hasattr(shell, "set_custom_exc"):
        def handler(self, etype, value, tb, tb_offset=None):
            line = exercise_stop(value, tb, root)
            if line is None:
                return self.showtraceback((etype, value, tb), tb_offset=tb_offset)
            print(line, file=sys.stderr)
        shell.set_custom_exc((NotImplementedError,), handler)
        return
    previous = sys.excepthook

    def hook(etype, value, tb):
        line = exercise_stop(value, tb, root)
        if line is None:
            return previous(etype, value, tb)
        print(line, file=sys.stderr)
    sys.excepthook = hook


def guard_lesson(root: Path = REPO_ROOT) -> None:
    """What every Lesson does first: refuse another checkout's minattn, and stop cleanly on an
    unimplemented exercise."""
    check_checkout(root)
    install_exercise_stop(root)
