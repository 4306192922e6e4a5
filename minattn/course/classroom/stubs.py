"""The functions that hold an exercise's regions, found and swapped in a running process.

- `stub_in_process(id)`: make one exercise raise NotImplementedError in this process, as in a
  student copy (pytest --stub-each: every exercise test must then fail with its own exercise;
  the grader stubs a region it cannot run apart).
- `trace_in_process(id, record)`: record which of the exercise's regions run (pytest
  --trace-regions: every region a copy strips must be reached by a test of its exercise).
- `holders(ids)`: (module, qualified name) of the functions holding the exercises' regions:
  the functions whose calls the grader sends to a submission's worker.
- `resolve(module, qualname)`: the function object itself.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from .. import REPO_ROOT
from .regions import BEGIN, all_exercises, descriptions, find_exercises, strip_solutions

SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)  # what a region can sit in


def _code_objects(code):
    yield code
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            yield from _code_objects(const)


def _functions_of(module):
    """Every function object defined in a module: top level, in classes, wrapped."""
    seen = set()

    def visit(obj, depth=0):
        if id(obj) in seen or depth > 3:
            return
        seen.add(id(obj))
        if isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
        if isinstance(obj, property):
            for f in (obj.fget, obj.fset, obj.fdel):
                if f is not None:
                    visit(f, depth + 1)
            return
        if hasattr(obj, "__code__") and getattr(obj, "__module__", None) == module.__name__:
            found.append(obj)
            if hasattr(obj, "__wrapped__"):
                visit(obj.__wrapped__, depth + 1)
        elif isinstance(obj, type) and obj.__module__ == module.__name__:
            for value in vars(obj).values():
                visit(value, depth + 1)
        elif hasattr(obj, "__wrapped__"):
            visit(obj.__wrapped__, depth + 1)

    found = []
    for value in list(vars(module).values()):
        visit(value)
    return found


def stub_in_process(ex_id: str, root: Path = REPO_ROOT):
    """Make exercise `ex_id` raise NotImplementedError in this process, as in a student copy,
    by swapping the code of the functions holding its regions; each stub raises from the line
    after its BEGIN marker. Returns a function that undoes it. (Lets one pytest run check every
    exercise's tests against its own stub.)"""
    what = descriptions(all_exercises(root))
    return _swap_code(ex_id, root, lambda text, rel: strip_solutions(text, {ex_id}, what,
                                                                     keep_lines=True), "stub")


def trace_in_process(ex_id: str, record, root: Path = REPO_ROOT):
    """Make every region of exercise `ex_id` call `record("<path>:<BEGIN line>")` when it is
    entered, then run as before (its BEGIN comment becomes that call, so no line moves).
    Returns a function that undoes it. (Which regions does a test of the exercise reach?)"""
    def rewrite(text, rel):
        lines = text.splitlines(keepends=True)
        for e in find_exercises(text):
            if e.id == ex_id:
                indent = BEGIN.match(lines[e.line - 1])["indent"]
                lines[e.line - 1] = f"{indent}{RECORD}({f'{rel}:{e.line}'!r})\n"
        return "".join(lines)
    return _swap_code(ex_id, root, rewrite, "trace", {RECORD: record})


RECORD = "__minattn_region_entered__"
_COMPILED: dict[tuple, dict] = {}  # (kind, exercise, path, text) -> its functions' new code


def _swap_code(ex_id: str, root: Path, rewrite, kind: str, names: dict | None = None):
    """Swap the code of the functions holding `ex_id`'s regions for that of `rewrite(source
    text, relative path)` (which must keep every line's number; `kind` names the rewrite: its
    code is compiled once per file text); `names` go into the modules' globals. Returns the
    function that undoes it."""
    undo, added = [], []
    for rel in sorted({str(e.path) for e in all_exercises(root) if e.id == ex_id}):
        path = Path(root) / rel
        module = importlib.import_module(
            ".".join(Path(rel).with_suffix("").parts).removesuffix(".__init__"))
        for key, value in (names or {}).items():
            added.append((module, key))
            setattr(module, key, value)
        text = path.read_text()
        if (kind, ex_id, str(path), text) not in _COMPILED:
            new_code = compile(rewrite(text, rel), str(path), "exec")
            _COMPILED[kind, ex_id, str(path), text] = {
                (c.co_qualname, c.co_firstlineno): c for c in _code_objects(new_code)}
        codes = _COMPILED[kind, ex_id, str(path), text]
        for f in _functions_of(module):
            new = codes.get((f.__code__.co_qualname, f.__code__.co_firstlineno))
            if new is not None and new != f.__code__ and new.co_freevars == f.__code__.co_freevars:
                undo.append((f, f.__code__))
                f.__code__ = new

    def restore():
        for f, code in reversed(undo):
            f.__code__ = code
        for module, key in added:
            if hasattr(module, key):
                delattr(module, key)
    return restore


def holders(ids, root: Path, nested: list | None = None) -> list[tuple[str, str]]:
    """(module, qualified name) of every top-level function or method holding a region of the
    exercises `ids`: the functions whose calls go to the worker. A region inside a nested
    function (a closure such as a FlexAttention mask_mod) cannot be called apart: its exercise
    id is appended to `nested` (the grader stubs it in the teacher's process: such a region is
    never graded from the teacher's solution). A region outside any function: ValueError."""
    found = []
    by_file: dict[str, list] = {}
    for e in all_exercises(root):
        if e.id in ids:
            by_file.setdefault(str(e.path), []).append(e)
    for rel, regions in sorted(by_file.items()):
        tree = ast.parse((Path(root) / rel).read_text())
        module = ".".join(Path(rel).with_suffix("").parts).removesuffix(".__init__")
        for e in regions:
            chain, node = [], tree
            while True:
                inner = next((c for c in ast.iter_child_nodes(node)
                              if isinstance(c, SCOPES)
                              and c.lineno <= e.line <= c.end_lineno), None)
                if inner is None:
                    break
                chain.append(inner)
                node = inner
            functions = [c for c in chain if not isinstance(c, ast.ClassDef)]
            if not functions:
                raise ValueError(f"{rel}:{e.line}: exercise {e.id}'s region is not inside a "
                                 "function; the grader can only run functions apart")
            if len(functions) > 1 or isinstance(chain[-1], ast.ClassDef):
                if nested is not None and e.id not in nested:
                    nested.append(e.id)
                continue
            qualname = ".".join(c.name for c in chain)
            if (module, qualname) not in found:
                found.append((module, qualname))
    return found


def resolve(module: str, qualname: str):
    """The plain function object `module.qualname` (a function or a method)."""
    obj = importlib.import_module(module)
    parts = qualname.split(".")
    for part in parts[:-1]:
        obj = getattr(obj, part)
    fn = vars(obj).get(parts[-1]) if isinstance(obj, type) else getattr(obj, parts[-1])
    fn = getattr(fn, "__func__", fn)  # staticmethod / classmethod
    if not hasattr(fn, "__code__"):
        raise ValueError(f"{module}.{qualname} is not a plain function")
    return fn
