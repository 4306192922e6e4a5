"""Checks of the exercises themselves, for the course's authors (tests/test_exercises.py runs them).

- `find_giveaways()`: functions that a student copy keeps and that would give an exercise's
  answer away (the torch twin of a NumPy exercise, a near-copy of its lines, a listed twin):
  each must carry the exercise's id too, so that stripping removes it.
- `audit()`: that, and every other way a student copy would give an answer away: visible
  tests or lessons repeating a region, test helpers computing an exercise's answer without
  calling it, visible tests checking a predict/experiment value, such values in comments,
  teacher-only tests outside tests/hidden/ (`python -m minattn.course.classroom audit`).
"""

from __future__ import annotations

import ast
import copy
import re
from functools import lru_cache
from itertools import islice
from pathlib import Path

from .. import REPO_ROOT
from .copies import source_files
from .regions import (
    all_exercises,
    by_id,
    descriptions,
    id_key,
    in_plumbing,
    strip_shown,
    strip_solutions,
)
from .stubs import holders, resolve, stub_in_process

# ============================================================================ give-aways
# Twins that no name or text rule can see: (function, twin) -- the twin must carry every
# exercise the function carries. (foo_np / foo_torch need no entry: rule 1 sees them. An entry
# whose twin no longer exists is skipped by the audit, and tests/test_layout.py fails on it.)
# A kernel that repeats an exercise's idea in another form (the block-sparse kernel's softmax
# across blocks, the window kernel's backward) is no twin: no test of the exercise runs it, so
# stripping it would leave `make exercises` saying PASS while its lesson stops
# (tests/test_exercises.py checks that every stripped region is reached; see reach.py).
TWINS = [
    ("sliding_window_mask_np", "dilated_window_mask_np"),     # dilation 1 is the window
    ("blocked_window_attention_torch", "global_window_attention_fast_torch"),
]


NOT_A_TWIN = re.compile(r"#\s*not a twin of exercise (?P<id>\S+?):")
SUFFIX = re.compile(r"_(np|torch|numpy|fast|ref|reference)$")


# The finders below read the same files: each text is parsed once per process (the trees are
# only read, never changed).
_parse = lru_cache(maxsize=512)(ast.parse)


def _stem(name: str) -> str:
    return SUFFIX.sub("", name.lstrip("_"))


def _norm(line: str) -> str:
    """A line reduced to what both twins share: no comments, spaces, np./torch. prefixes."""
    line = line.split("#", 1)[0]
    line = re.sub(r"\b(np|numpy|torch|F)\.", "X.", line)
    line = line.replace("keepdims", "keepdim").replace("axis=", "dim=")
    return re.sub(r"\s+", "", line)


def function_spans(text: str):
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
    walk(_parse(text), "")
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
    # (file, qualname, name, first, last, its normalised lines, exercise ids inside, waived ids)
    funcs = []
    for path in sorted((root / "minattn").rglob("*.py")):
        if "__pycache__" in path.parts or in_plumbing(path.relative_to(root / "minattn")):
            continue
        text = path.read_text()
        lines = text.splitlines()
        rel = str(path.relative_to(root))
        regions = [e for e in exercises if str(e.path) == rel]
        for qual, first, last in function_spans(text):
            body = lines[first - 1:last]
            inside = {e.id for e in regions if first <= e.line <= last}
            waived = {m["id"] for m in map(NOT_A_TWIN.search, body) if m}
            funcs.append((rel, qual, qual.split(".")[-1], first, last, {_norm(x) for x in body},
                          inside, waived))
    problems = []
    names = {}
    for f in funcs:
        names.setdefault(f[2], []).append(f)
    groups = by_id(exercises)
    significant = {(e.path, e.line): _significant(root, e) for e in exercises}
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
            for r in regions:
                lines = significant[r.path, r.line]
                shared = lines & f[5]
                if len(lines) >= 2 and len(shared) >= max(2, 0.6 * len(lines)):
                    problems.append(f"exercise {ex_id}: {f[0]}::{f[1]} repeats {len(shared)} of "
                                    f"the {len(lines)} lines of its region "
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


# ============================================================================ leaks elsewhere
def audit(root: Path = REPO_ROOT) -> list[str]:
    """Everything that would give an answer away in a student copy (`classroom audit`):
    unmarked twins in the library (find_giveaways), visible test code that repeats a region
    or computes an exercise's answer without calling it, a lesson line whose expression is an
    exercise's (find_computed_answers), visible tests that check a predict or
    experiment answer, such answers written in comments or docstrings, and teacher-only test
    files that would be copied. Untracked files are never copied (copies.source_files)."""
    return sorted(set(find_giveaways(root) + find_copied_lines(root) + find_helper_twins(root)
                      + find_computed_answers(root) + find_answer_checks(root)
                      + find_written_answers(root) + find_teacher_files(root)))


def _student_files(root: Path, folders=("tests", "lessons")) -> list[str]:
    """The Python files of these folders that a student copy gets."""
    return [rel for rel in source_files(root, student=True)
            if rel.endswith(".py") and rel.split("/")[0] in folders]


def _significant(root: Path, e) -> set[str]:
    lines = (Path(root) / e.path).read_text().splitlines()[e.line:e.end - 1]
    return {n for n in map(_norm, lines) if len(n) >= 12 and not n.startswith("raise")}


def find_copied_lines(root: Path = REPO_ROOT) -> list[str]:
    """Visible tests and lessons that repeat 40 % of an implement region's lines or more (or
    its one long line): the answer, or a few edits from it, readable in the copy."""
    root = Path(root)
    regions = [(e, _significant(root, e)) for e in all_exercises(root) if e.kind == "implement"]
    problems = []
    for rel in _student_files(root):
        text = (root / rel).read_text()
        if rel.startswith("lessons/"):  # as a copy with every exercise handed out has it
            text = strip_shown(text)
        own = {_norm(x) for x in text.splitlines()}
        for e, significant in regions:
            shared = significant & own
            one_long = len(significant) == 1 and shared and len(next(iter(shared))) >= 30
            many = len(significant) >= 2 and len(shared) >= max(2, 0.4 * len(significant))
            if one_long or many:
                problems.append(f"exercise {e.id}: {rel} repeats {len(shared)} of the "
                                f"{len(significant)} lines of its region {e.path}:{e.line}")
    return problems


# An exercise's answer is what its region returns, its local names inlined: a pattern whose
# free names (the function's arguments) stand for any expression. A lesson computes the answer
# where one of its expressions, its earlier assignments inlined, matches the pattern -- np. or
# torch., dtype casts and the two libraries' keyword spellings aside. A smaller pattern than
# MIN_OPERATIONS is a common idiom, not an answer.
MIN_OPERATIONS = 4
CASTS = {"astype", "to", "float", "double", "type"}
MAX_INLINED = 400  # nodes: a name bound to a larger expression stays a name


def _inline(node: ast.AST, env: dict) -> ast.AST:
    """`node` with every name bound in `env` replaced by its (inlined) expression; nodes keep
    the line they come from. Unchanged subtrees and the bound expressions are shared, not
    copied: nothing here changes a tree once it is built."""
    if isinstance(node, ast.Name):
        return env.get(node.id, node)
    changed = {}
    for field, value in ast.iter_fields(node):
        if isinstance(value, ast.AST):
            new = _inline(value, env)
        elif isinstance(value, list):
            new = [_inline(v, env) if isinstance(v, ast.AST) else v for v in value]
            new = value if all(a is b for a, b in zip(new, value)) else new
        else:
            continue
        if new is not value:
            changed[field] = new
    if not changed:
        return node
    out = copy.copy(node)
    for field, value in changed.items():
        setattr(out, field, value)
    return out


def _operations(node: ast.AST, memo: dict | None = None) -> int:
    """The calls, operators, comparisons and subscripts in `node` (memo: counts by node id,
    so that counting every sub-expression of a tree reads each node once)."""
    if memo is not None and id(node) in memo:
        return memo[id(node)]
    count = isinstance(node, (ast.Call, ast.BinOp, ast.Compare, ast.Subscript)) + sum(
        _operations(child, memo) for child in ast.iter_child_nodes(node))
    if memo is not None:
        memo[id(node)] = count
    return count


def _shape(node, modules: set[str], variables: bool, memo: dict | None = None):
    """An expression as nested tuples (label, *children): a function is named by its last
    attribute (np.where, torch.where and where match), casts are dropped, axis/keepdims are
    spelled dim/keepdim, numbers are floats. A name is ("var",) in a pattern (`variables`), a
    leaf of its own in a lesson."""
    memo = {} if memo is None else memo
    if id(node) in memo:
        return memo[id(node)]

    def sub(n):
        return _shape(n, modules, variables, memo)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr in CASTS:
        out = sub(node.func.value)
    elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
            and node.value.id in modules:
        out = ("fn", node.attr)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        out = ("call", ("fn", node.func.id), *map(sub, node.args),
               *sorted(map(sub, node.keywords), key=repr))
    elif isinstance(node, ast.Call):
        out = ("call", sub(node.func), *map(sub, node.args),
               *sorted(map(sub, node.keywords), key=repr))
    elif isinstance(node, ast.Name):
        out = ("var", node.id) if variables else ("name", node.id)
    elif isinstance(node, ast.Constant):
        v = node.value
        out = ("const", float(v) if isinstance(v, (int, float)) and not isinstance(v, bool)
               else repr(v))
    elif isinstance(node, ast.keyword):
        out = ("kw", {"axis": "dim", "keepdims": "keepdim"}.get(node.arg, node.arg),
               sub(node.value))
    elif isinstance(node, ast.AST):
        out = (type(node).__name__, *(
            tuple(map(sub, v)) if isinstance(v, list) else sub(v) if isinstance(v, ast.AST)
            else v for _, v in ast.iter_fields(node) if not isinstance(v, ast.expr_context)))
    else:
        out = node
    memo[id(node)] = out
    return out


def _names(pattern) -> set[str]:
    """The function and attribute names a pattern holds (np.exp's "exp", x.sum's "sum"): any
    source text whose expressions can take its shape spells each of them."""
    if not isinstance(pattern, tuple) or not pattern:
        return set()
    if pattern[0] == "fn" or (pattern[0] == "Attribute" and isinstance(pattern[-1], str)):
        own = {pattern[-1]}
    else:
        own = set()
    return own.union(*(_names(p) for p in pattern[1:]))


def _matches(pattern, shape, bound: dict) -> bool:
    """True when `shape` is `pattern` with each ("var", name) standing for one sub-expression
    (the same one wherever the name appears)."""
    if isinstance(pattern, tuple) and pattern[:1] == ("var",):
        if pattern[1] in bound:
            return bound[pattern[1]] == shape
        bound[pattern[1]] = shape
        return True
    if isinstance(pattern, tuple):
        return (isinstance(shape, tuple) and len(shape) == len(pattern)
                and all(_matches(p, s, bound) for p, s in zip(pattern, shape)))
    return pattern == shape


def _modules(tree: ast.Module) -> set[str]:
    """The names a module imports (np, torch, F, th, ...): a function reached through one is
    named by its attribute."""
    out = {"np", "numpy", "torch", "F"}
    todo = [tree]
    while todo:  # statements only (an import is one): expressions hold none
        node = todo.pop()
        if isinstance(node, ast.Import):
            out |= {(a.asname or a.name).split(".")[0] for a in node.names}
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            inner = getattr(node, field, None)
            if isinstance(inner, list):
                todo.extend(inner)
    return out


def _bind(env: dict, target: ast.expr, value: ast.expr | None) -> None:
    """Record `target = value` (value already inlined); a name bound otherwise is forgotten."""
    if isinstance(target, ast.Name):
        if value is not None and next(islice(ast.walk(value), MAX_INLINED, None), None) is None:
            env[target.id] = value
        else:
            env.pop(target.id, None)
    elif isinstance(target, (ast.Tuple, ast.List)):
        for t in target.elts:
            _bind(env, t, None)


def _expressions(body: list[ast.stmt], env: dict | None = None):
    """The expression of each statement in source order, earlier assignments inlined (a
    function's body read on its own, its arguments left as names)."""
    env = {} if env is None else env
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            env.pop(stmt.name, None)
            yield from _expressions(stmt.body, {})
            continue
        value = getattr(stmt, "iter", None) or getattr(stmt, "test", None) \
            or getattr(stmt, "value", None)
        inlined = _inline(value, env) if isinstance(value, ast.expr) else None
        if inlined is not None:
            yield inlined
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                _bind(env, target, inlined if len(stmt.targets) == 1 else None)
        elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign, ast.For)):
            _bind(env, stmt.target, inlined if isinstance(stmt, ast.AnnAssign) else None)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                env.pop((alias.asname or alias.name).split(".")[0], None)
        for field in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list):
                yield from _expressions(inner, env)


def region_expression(root: Path, e) -> ast.expr | None:
    """What an implement region returns, its local names inlined; None for a region that is not
    straight-line code ending in a return (a loop, an early return, a region that sets names)."""
    import textwrap

    text = "\n".join((Path(root) / e.path).read_text().splitlines()[e.line:e.end - 1])
    try:
        body = ast.parse(textwrap.dedent(text)).body
    except SyntaxError:
        return None
    if not body or not isinstance(body[-1], ast.Return) or body[-1].value is None:
        return None
    env = {}
    for stmt in body[:-1]:
        if not isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            return None
        value = _inline(stmt.value, env)
        for target in getattr(stmt, "targets", [getattr(stmt, "target", None)]):
            _bind(env, target, value)
    return _inline(body[-1].value, env)


def find_computed_answers(root: Path = REPO_ROOT, folders=("tests", "lessons")) -> list[str]:
    """Lesson and visible test lines that compute an implement exercise's answer: a
    sub-expression, with the file's earlier assignments inlined, that matches what the region
    returns (its local names inlined, its arguments standing for any expression; see _shape).
    A lesson that writes `real = mask[..., None]` then
    `np.where(real, x, 0.0).sum(axis=1) / real.sum(axis=1)` gives the masked mean away
    whatever it names its arrays."""
    root = Path(root)
    patterns = []
    for e in all_exercises(root):
        if e.kind == "implement" and (expr := region_expression(root, e)) is not None \
                and _operations(expr) >= MIN_OPERATIONS:
            modules = _modules(_parse((root / e.path).read_text()))
            pattern = _shape(expr, modules, variables=True)
            patterns.append((e, pattern, _names(pattern)))
    if not patterns:
        return []
    problems = []
    for rel in _student_files(root, folders):
        text = (root / rel).read_text()
        if rel.startswith("lessons/"):  # as a copy with every exercise handed out has it
            text = strip_shown(text)
        # a file that never writes some function or attribute name of a pattern cannot match it
        candidates = [(e, p) for e, p, names in patterns if all(n in text for n in names)]
        if not candidates:
            continue
        try:
            tree = _parse(text)
        except SyntaxError:
            continue
        modules = _modules(tree)
        # Every sub-expression of the file's statements, each read once: inlining shares an
        # assignment's subtree between the statements after it. (The statements are kept in
        # `todo` and `expressions` until the end: the memos key on the nodes' id().)
        expressions = list(_expressions(tree.body))
        memo, counts, seen, todo = {}, {}, set(), list(expressions)
        while todo:
            node = todo.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            todo.extend(ast.iter_child_nodes(node))
            if not isinstance(node, ast.expr) or _operations(node, counts) < MIN_OPERATIONS:
                continue
            shape = _shape(node, modules, variables=False, memo=memo)
            for e, pattern in candidates:
                if _matches(pattern, shape, {}):
                    problems.append(f"exercise {e.id}: {rel}:{node.lineno} computes what "
                                    f"its region {e.path}:{e.line} returns: call the "
                                    "library or mark the lines as a shown region")
    return sorted(set(problems))


PROBE = (7, 1, 2, 3), (9, 2, 3, 1)  # integer arguments (n, w, dilation, ...) for the helper probe


def find_helper_twins(root: Path = REPO_ROOT, files=None) -> list[str]:
    """Functions of visible tests (or of `files`) that compute what an exercise's function
    computes, without calling it. Probed where that is safe and cheap: exercise functions whose
    required parameters are all integers (masks, allocations), against test helpers whose first
    parameters have the same names; with the exercise stubbed, a helper that still returns the
    teacher's answer on every probe gives it away. (It imports the library: only for the
    checkout this Python imports.)"""
    import importlib.util
    import inspect

    import numpy as np

    import minattn

    root = Path(root)
    if Path(minattn.__file__).resolve().parents[1] != root.resolve():
        return []
    targets = []
    for ex_id, regions in by_id(all_exercises(root)).items():
        if regions[0].kind != "implement":
            continue
        for module, qualname in holders({ex_id}, root):
            if "." in qualname:
                continue
            fn = resolve(module, qualname)
            required = [p for p in inspect.signature(fn).parameters.values()
                        if p.default is p.empty and p.kind <= p.POSITIONAL_OR_KEYWORD]
            if required and all(p.annotation in (int, "int") for p in required):
                targets.append((ex_id, fn, [p.name for p in required]))
    if not targets:
        return []
    wanted = {tuple(names) for _, _, names in targets}

    def has_candidates(path: Path) -> bool:  # import only files with a helper to probe
        tree = _parse(Path(path).read_text())
        return any(isinstance(node, ast.FunctionDef) and not node.name.startswith("test")
                   and any(tuple(a.arg for a in node.args.args[:len(w)]) == w for w in wanted)
                   for node in tree.body)
    helpers = []
    for path in files or [root / rel for rel in _student_files(root, ("tests",))]:
        if not has_candidates(path):
            continue
        rel = Path(path).relative_to(root) if Path(path).is_relative_to(root) else Path(path)
        name = "_audit_" + re.sub(r"\W", "_", str(rel))
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception:  # noqa: BLE001 -- a test file that does not import alone: not probed
            continue
        for attr, obj in vars(module).items():
            if (inspect.isfunction(obj) and obj.__module__ == name and not attr.startswith("test")
                    and not hasattr(obj, "_pytestfixturefunction")):
                helpers.append((rel, attr, obj))
    problems = []
    for ex_id, fn, names in targets:
        expected = [fn(*args[:len(names)]) for args in PROBE]
        restore = stub_in_process(ex_id, root)
        try:
            for rel, attr, helper in helpers:
                params = [p.name for p in inspect.signature(helper).parameters.values()]
                if params[:len(names)] != names:
                    continue
                try:
                    same = all(np.array_equal(np.asarray(helper(*args[:len(names)])), want)
                               for args, want in zip(PROBE, expected))
                except Exception:  # noqa: BLE001 -- calls the stub, or cannot take the probe
                    same = False
                if same:
                    problems.append(f"exercise {ex_id}: {rel}::{attr} computes what "
                                    f"{fn.__name__} does without calling it: move it to "
                                    f"tests/hidden/ or call {fn.__name__}")
        finally:
            restore()
    return problems


def _predict_ids(root: Path) -> dict[str, str]:
    return {k: v[0].kind for k, v in by_id(all_exercises(root)).items() if v[0].kind != "implement"}


def find_answer_checks(root: Path = REPO_ROOT) -> list[str]:
    """Visible tests marked with a predict or experiment exercise: a test that checks the value
    is an oracle a student can run (and read); those live in tests/hidden/."""
    root = Path(root)
    kinds = _predict_ids(root)
    problems = []
    for rel in _student_files(root, ("tests",)):
        tree = _parse((root / rel).read_text())
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "exercise" and node.args
                    and isinstance(node.args[0], ast.Constant) and node.args[0].value in kinds):
                ex_id = node.args[0].value
                problems.append(f"exercise {ex_id}: {rel}:{node.lineno} checks the value of a "
                                f"{kinds[ex_id]} exercise where students can read and run it: "
                                "move the test to tests/hidden/")
    return problems


def _answer_forms(value) -> list[str]:
    """How a numeric answer would be written in a comment (regular expressions). Only
    decimals: a small integer or a choice ("B", {"a"}) also appears in every question that
    lists the choices, and the tests that checked those now live in tests/hidden/."""
    if isinstance(value, float) and not isinstance(value, bool):
        forms = {f"{value:.2f}", f"{value:.3f}", f"{value:.4f}".rstrip("0")}
        return [rf"(?<![\d.]){re.escape(f)}(?!\d)" for f in forms if len(f.strip("0.-")) >= 2]
    return []


def _returned_constants(root: Path, e) -> list:
    """The values a predict/experiment region returns as constants (a number, a fraction of
    two numbers, a string, a set); computed answers are not listed."""
    text = "\n".join(line.strip() for line in
                     (Path(root) / e.path).read_text().splitlines()[e.line:e.end - 1])
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    values = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Return) and node.value is not None:
            try:
                values.append(_constant(node.value))
            except ValueError:
                pass
    return values


def _constant(node):
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
        a, b = _constant(node.left), _constant(node.right)
        return {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}.get(type(node.op)) \
            if not isinstance(node.op, ast.Div) else a / b
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        raise ValueError from None


def _comments_and_docstrings(text: str) -> list[tuple[int, str]]:
    import io
    import tokenize

    out = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return out
    previous = tokenize.NEWLINE
    for tok in tokens:
        if tok.type == tokenize.COMMENT:
            out.append((tok.start[0], tok.string))
        elif tok.type == tokenize.STRING and previous in (tokenize.NEWLINE, tokenize.INDENT,
                                                          tokenize.DEDENT, tokenize.NL):
            out.append((tok.start[0], tok.string))  # a docstring or a bare string
        if tok.type not in (tokenize.COMMENT, tokenize.NL):
            previous = tok.type
    return out


def find_written_answers(root: Path = REPO_ROOT) -> list[str]:
    """Predict/experiment answers (the constants their regions return) written in a comment
    or docstring of the library (outside the regions, which are stripped) or of a visible
    test."""
    root = Path(root)
    exercises = all_exercises(root)
    answers = [(e, v) for e in exercises if e.kind != "implement"
               for v in _returned_constants(root, e)]
    if not answers:
        return []
    ids = {e.id for e, _ in answers}
    anywhere = re.compile("|".join(f for _, v in answers for f in _answer_forms(v)) or "(?!)")
    problems = []
    for rel in _student_files(root, ("tests", "minattn")):
        if rel.startswith("minattn/") and in_plumbing(Path(rel).relative_to("minattn")):
            continue
        text = (root / rel).read_text()
        if not anywhere.search(text):  # no answer's form anywhere in the file
            continue
        if rel.startswith("minattn/"):
            text = strip_solutions(text, ids, descriptions(exercises), keep_lines=True)
        for line, chunk in _comments_and_docstrings(text):
            for e, value in answers:
                for form in _answer_forms(value):
                    if re.search(form, chunk):
                        problems.append(f"exercise {e.id}: {rel}:{line} writes its answer "
                                        f"({value!r}) in a comment or docstring")
    return problems


def find_teacher_files(root: Path = REPO_ROOT) -> list[str]:
    """Teacher-only tests that a student copy would get: a hidden* folder other than
    tests/hidden/, or a test module marked hidden outside it."""
    root = Path(root)
    problems = []
    for rel in source_files(root, student=True):
        parts = Path(rel).parts
        if parts[0] == "tests" and any(p.startswith("hidden") for p in parts[1:-1]):
            problems.append(f"{rel}: teacher-only tests outside tests/hidden/ would reach students")
        elif rel.endswith(".py") and parts[0] == "tests" and re.search(
                r"^(@pytest\.mark\.hidden|pytestmark\s*=.*mark\.hidden)", (root / rel).read_text(),
                re.M):
            problems.append(f"{rel}: marked hidden but outside tests/hidden/: it would reach "
                            "students")
    return problems
