"""Checks of the exercises themselves, for the course's authors (tests/test_exercises.py runs them).

- `stub_in_process(id)`: make one exercise raise NotImplementedError in this process, as in a
  student copy (pytest --stub-each: every exercise test must then fail with its own exercise).
- `find_giveaways()`: functions that a student copy keeps and that would give an exercise's
  answer away (the torch twin of a NumPy exercise, a near-copy of its lines, a listed twin):
  each must carry the exercise's id too, so that stripping removes it
  (`python -m minattn.tools.exercises audit`).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from . import REPO_ROOT
from .exercises import all_exercises, by_id, descriptions, id_key, strip_solutions


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
    by swapping the code of the functions holding its regions. Returns a function that undoes
    it. (Lets one pytest run check every exercise's tests against its own stub.)"""
    import importlib

    exercises = all_exercises(root)
    what = descriptions(exercises)
    undo = []
    for rel in sorted({str(e.path) for e in exercises if e.id == ex_id}):
        path = Path(root) / rel
        name = ".".join(Path(rel).with_suffix("").parts)
        name = name[:-len(".__init__")] if name.endswith(".__init__") else name
        module = importlib.import_module(name)
        stripped = compile(strip_solutions(path.read_text(), {ex_id}, what, keep_lines=True),
                           str(path), "exec")  # every function keeps its first line number
        codes = {(c.co_qualname, c.co_firstlineno): c for c in _code_objects(stripped)}
        for f in _functions_of(module):
            new = codes.get((f.__code__.co_qualname, f.__code__.co_firstlineno))
            if new is not None and new != f.__code__ and new.co_freevars == f.__code__.co_freevars:
                undo.append((f, f.__code__))
                f.__code__ = new

    def restore():
        for f, code in reversed(undo):
            f.__code__ = code
    return restore


# ============================================================================ give-aways
# Twins that no name or text rule can see: (function, twin) -- the twin must carry every
# exercise the function carries. (foo_np / foo_torch need no entry: rule 1 sees them; an entry
# whose twin no longer exists is skipped.)
TWINS = [
    ("attention_backward_np", "_window_attention_backward"),  # the windowed kernel's backward
    ("attention_backward_np", "window_attention_backward_torch"),
    ("sliding_window_mask_np", "dilated_window_mask_np"),     # dilation 1 is the window
    ("blocked_window_attention_torch", "_blocks_with_globals"),
    ("blocked_window_attention_torch", "global_window_attention_torch"),
    ("e_step_np", "em_step_torch"),                           # the vectorised torch EM
    ("m_step_np", "em_step_torch"),
]


NOT_A_TWIN = re.compile(r"#\s*not a twin of exercise (?P<id>\S+?):")
SUFFIX = re.compile(r"_(np|torch|numpy|fast|ref|reference)$")


def _stem(name: str) -> str:
    return SUFFIX.sub("", name.lstrip("_"))


def _norm(line: str) -> str:
    """A line reduced to what both twins share: no comments, spaces, np./torch. prefixes."""
    line = line.split("#", 1)[0]
    line = re.sub(r"\b(np|numpy|torch|F)\.", "X.", line)
    line = line.replace("keepdims", "keepdim").replace("axis=", "dim=")
    return re.sub(r"\s+", "", line)


def _functions(text: str):
    """(qualified name, first line, last line) of every function in a source text (1-based)."""
    out = []

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qual = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    out.append((qual, child.lineno, child.end_lineno))
                walk(child, qual + ".")
            else:
                walk(child, prefix)
    walk(ast.parse(text), "")
    return out


def find_giveaways(root: Path = REPO_ROOT, twins=TWINS) -> list[str]:
    """Functions that would give an exercise's answer away in a student copy:
    (1) a function sharing the stem of a function that holds exercise E (foo_np / foo_torch)
        but holding no region of E itself;
    (2) a function holding no region of E whose lines repeat most of an E region's lines
        (after dropping comments, spaces and np./torch. prefixes);
    (3) from `twins` [(function, its twin)]: the twin, where it exists, must carry every
        exercise the function does.
    A function that is not a twin says so with a comment `# not a twin of exercise E: why`."""
    root = Path(root)
    exercises = all_exercises(root)
    funcs = []  # (file, qualname, name, first, last, text, exercise ids inside, waived ids)
    for path in sorted((root / "minattn").rglob("*.py")):
        if "__pycache__" in path.parts or path.parent.name == "tools":
            continue
        text = path.read_text()
        lines = text.splitlines()
        rel = str(path.relative_to(root))
        regions = [e for e in exercises if str(e.path) == rel]
        for qual, first, last in _functions(text):
            body = lines[first - 1:last]
            inside = {e.id for e in regions if first <= e.line <= last}
            waived = {m["id"] for m in map(NOT_A_TWIN.search, body) if m}
            funcs.append((rel, qual, qual.split(".")[-1], first, last, body, inside, waived))
    problems = []
    names = {}
    for f in funcs:
        names.setdefault(f[2], []).append(f)
    groups = by_id(exercises)
    for ex_id, regions in groups.items():
        holders = [f for f in funcs if ex_id in f[6]]
        stems = {_stem(f[2]) for f in holders}
        for f in funcs:
            if ex_id in f[6] or ex_id in f[7]:
                continue
            if _stem(f[2]) in stems and f[2] not in {h[2] for h in holders}:
                problems.append(f"exercise {ex_id}: {f[0]}::{f[1]} is a twin (same stem) "
                                f"of a function holding it, and is not marked {ex_id}")
                continue
            own = {_norm(x) for x in f[5]}
            for r in regions:
                lines = (root / r.path).read_text().splitlines()[r.line:r.end - 1]
                significant = {n for n in map(_norm, lines) if len(n) >= 12
                               and not n.startswith("raise")}
                shared = significant & own
                if len(significant) >= 2 and len(shared) >= max(2, 0.6 * len(significant)):
                    problems.append(f"exercise {ex_id}: {f[0]}::{f[1]} repeats {len(shared)} of "
                                    f"the {len(significant)} lines of its region "
                                    f"{r.path}:{r.line}, and is not marked {ex_id}")
                    break
    for function, twin in twins:
        held = set().union(*[f[6] for f in names.get(function, [])] or [set()])
        if not held:
            continue
        if twin not in names:  # renamed or gone: rules 1 and 2 still watch its successor
            continue
        missing = held - set().union(*[f[6] | f[7] for f in names[twin]])
        if missing:
            problems.append(f"exercise {' '.join(sorted(missing, key=id_key))}: {twin} gives "
                            f"{function}'s answer away and is not marked")
    return sorted(set(problems))
