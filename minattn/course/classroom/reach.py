"""Does a test of each exercise reach every region that a student copy strips for it?

A handed-out exercise must remove only code that its own tests run: a region no test of its
id reaches is stripped from the copy while `make exercises EX=<id>` says PASS, and the lesson
that runs it stops with "Exercise <id> is not implemented yet" -- the student is sent round in
a loop. tests/test_exercises.py checks every region in two steps:

1. the stub-each run (every exercise test with its own exercise stubbed, `pytest --stub-each`)
   records where each failing test's NotImplementedError came from: a stub raises from the
   line after its BEGIN marker, so the region a test reached first is known (`first_reached`);
2. a region reached first by no test (a torch twin whose tests call the NumPy reference
   first, say) is traced: `pytest --trace-regions` runs the tests of its exercise unstubbed,
   with every region recording that it was entered (stubs.trace_in_process), starting with
   the tests that name the region's function, directly or through the library's calls
   (`candidates`, a cheap guess by name that only orders the run, and decides nothing).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from .. import REPO_ROOT
from .regions import Exercise, all_exercises, by_id, id_key

SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def first_reached(report: dict) -> set[str]:
    """'path:BEGIN line' of every region whose stub a test of its own exercise raised (from a
    `--stub-each` exercise report)."""
    reached = set()
    for ex_id, counts in report.get("exercises", {}).items():
        for where in counts.get("raised_at", []):
            path, _, line = where.rpartition(":")
            if line.isdigit():
                reached.add(f"{path}:{int(line) - 1}")  # the stub sits right after BEGIN
    return reached


def key(region: Exercise) -> str:
    return f"{region.path}:{region.line}"


def _names(node) -> set[str]:
    """The names a piece of code mentions: variables, and attributes (`x.forward`)."""
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute):
            out.add(n.attr)
    return out


def library_calls(root: Path = REPO_ROOT) -> dict[str, set[str]]:
    """Function or class name -> the names its body mentions, over all of minattn/ (a class
    mentions what its methods do: building one reaches its forward)."""
    calls: dict[str, set[str]] = {}
    for path in sorted((Path(root) / "minattn").rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, SCOPES):
                calls.setdefault(node.name, set()).update(_names(node) - {node.name})
    return calls


def exercise_tests(root: Path = REPO_ROOT) -> list[tuple[str, str, set[str]]]:
    """(node id, exercise id, the names it mentions, with the test module's own helpers and
    fixtures expanded) of every test function marked @pytest.mark.exercise("<id>")."""
    found = []
    for path in sorted((Path(root) / "tests").rglob("test_*.py")):
        tree = ast.parse(path.read_text())
        local = {n.name: _names(n) for n in tree.body if isinstance(n, SCOPES)}
        for node in tree.body:
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            marks = [d for d in node.decorator_list if isinstance(d, ast.Call)
                     and isinstance(d.func, ast.Attribute) and d.func.attr == "exercise"
                     and d.args and isinstance(d.args[0], ast.Constant)]
            if not marks:
                continue
            names, todo = set(), list(_names(node) | {a.arg for a in node.args.args})
            while todo:  # the module's helpers and fixtures it uses, transitively
                name = todo.pop()
                if name not in names:
                    names.add(name)
                    todo += local.get(name, ())
            nodeid = f"{path.relative_to(root).as_posix()}::{node.name}"
            found.append((nodeid, str(marks[0].args[0].value), names))
    return found


def region_scopes(root: Path, region: Exercise) -> set[str]:
    """The names of the functions and classes a region sits in."""
    tree = ast.parse((Path(root) / region.path).read_text())
    return {n.name for n in ast.walk(tree) if isinstance(n, SCOPES)
            and n.lineno <= region.line <= n.end_lineno}


def candidates(root: Path, region: Exercise, tests=None, calls=None) -> list[str]:
    """Node ids of the tests of the region's exercise that mention a function holding it, or
    one that (by name) calls such a function: where to look first."""
    tests = exercise_tests(root) if tests is None else tests
    calls = library_calls(root) if calls is None else calls
    wanted = region_scopes(root, region)
    out = []
    for nodeid, ex_id, names in tests:
        if ex_id != region.id:
            continue
        seen, todo = set(), list(names)
        while todo and not wanted & seen:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo += calls.get(name, ())
        if wanted & seen:
            out.append(nodeid)
    return out


def unreached(report: dict, run, root: Path = REPO_ROOT) -> list[str]:
    """The regions that no test of their exercise reaches, each with what was tried. `report`:
    the stub-each run's exercise report; `run(args)` runs pytest in the checkout with these
    arguments and returns its exercise report (check.run_pytest's)."""
    reached = first_reached(report)
    missing = [r for regions in by_id(all_exercises(root)).values() for r in regions
               if key(r) not in reached]
    if not missing:
        return []
    tests, calls = exercise_tests(root), library_calls(root)
    args, tried = [], {}
    for region in missing:
        found = candidates(root, region, tests, calls)
        tried[key(region)] = found
        if not found:  # nothing names it: run every test file of the exercise
            quoted = re.compile(rf"""exercise\(\s*["']{re.escape(region.id)}["']""")
            found = [p.relative_to(root).as_posix()
                     for p in sorted((Path(root) / "tests").rglob("test_*.py"))
                     if quoted.search(p.read_text())]
        args += [a for a in found if a not in args]
    ids = sorted({r.id for r in missing}, key=id_key)
    traced = run([*args, "--trace-regions", "--exercises", *ids]).get("exercises", {})
    problems = []
    for region in missing:
        if key(region) not in traced.get(region.id, {}).get("entered", []):
            problems.append(
                f"exercise {region.id}: no test marked with it reaches its region "
                f"{key(region)} (tests that name its function: "
                f"{', '.join(tried[key(region)]) or 'none'}); a student copy would strip "
                "code that `make exercises` never checks: drop the markers, or mark a test")
    return problems
