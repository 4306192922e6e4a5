"""The shape of the code, checked from its source: one file per mechanism, speed apart, the
course's machinery apart, imports one way (mechanism <- fast <- course).

    minattn/<mechanism>.py   the math: NumPy reference first, its torch twin, the nn.Modules;
                             imports only the contract, its rules and other mechanisms
    minattn/contract.py      the input contract's language (`@checked`); imports nothing of
                             minattn
    minattn/checks.py        the contracts' named rules; imports only minattn.contract
    minattn/fast/<name>.py   the same numbers, faster; imports mechanisms, contract, checks
    minattn/course/          the lessons' tasks, training, figures, statistics, pages, classroom;
                             imports anything, imported by nothing above

(tests/test_lesson_tools.py checks that no lesson loads the classroom.)
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "minattn"
MECHANISMS = ["attention", "sparse", "multiscale", "xl", "lstm_attention", "ibm1", "task_heads",
              "agreement", "encoder"]
READABLE = 900  # lines: a mechanism's file past this is a sign to look again (not a rule)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def library_files() -> list[Path]:
    return sorted(p for p in LIBRARY.rglob("*.py") if "__pycache__" not in p.parts)


def imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names) for every import in the file, function-local ones included, with
    relative imports resolved to absolute module names."""
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found.append((module, [alias.name for alias in node.names]))
    return found


def library_targets(path: Path) -> set[str]:
    """The library modules a file imports (`from minattn import xl` counts as minattn.xl)."""
    modules = {module_name(p) for p in library_files()}
    out = set()
    for module, names in imports(path):
        if module.startswith("minattn"):
            out.update(t for t in [module] + [f"{module}.{n}" for n in names] if t in modules)
    return out - {module_name(path), "minattn"}


def graph() -> dict[str, set[str]]:
    return {module_name(p): library_targets(p) for p in library_files()}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_no_import_goes_round_in_a_circle():
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_contract_imports_nothing_of_the_library_and_its_rules_only_the_contract():
    assert not library_targets(LIBRARY / "contract.py")
    assert library_targets(LIBRARY / "checks.py") == {"minattn.contract"}


@pytest.mark.parametrize("name", MECHANISMS)
def test_a_mechanism_is_one_file_that_reads_top_down(name):
    """minattn/<name>.py, no package of the same name, no claims file; it imports only the
    contract, its rules and other mechanisms; its first function is a NumPy reference and its
    modules come after every NumPy function (the reference first, then its torch twin, then
    the modules)."""
    path = LIBRARY / f"{name}.py"
    assert path.is_file(), f"{path.relative_to(ROOT)} does not exist"
    assert not (LIBRARY / name).is_dir(), f"minattn/{name}/ is still a package"
    allowed = {"minattn.contract", "minattn.checks"} | {f"minattn.{m}" for m in MECHANISMS}
    wrong = sorted(library_targets(path) - allowed)
    assert not wrong, f"minattn/{name}.py imports {wrong} (a mechanism imports only the " \
                      "contract, its rules and other mechanisms)"
    body = ast.parse(path.read_text(encoding="utf-8")).body
    funcs = [n for n in body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")]
    classes = [n for n in body if isinstance(n, ast.ClassDef)
               and any(ast.unparse(b) in ("nn.Module", "torch.nn.Module") for b in n.bases)]
    numpy_funcs = [f for f in funcs if f.name.endswith("_np")]
    if numpy_funcs:
        assert funcs[0].name.endswith("_np"), f"the first function is {funcs[0].name}"
        assert all(c.lineno > numpy_funcs[-1].lineno for c in classes), \
            "an nn.Module comes before the NumPy reference ends"
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= READABLE, f"minattn/{name}.py has {lines} lines: split it by idea"


def test_speed_lives_apart_and_imports_no_course():
    """Every `*_fast_*` function is in minattn/fast/; fast imports no course module."""
    wrong = []
    for path in library_files():
        rel = path.relative_to(LIBRARY)
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and "_fast_" in node.name and \
                    rel.parts[0] != "fast":
                wrong.append(f"{rel}: {node.name}")
        if rel.parts[0] == "fast":
            wrong += [f"{rel} imports {t}" for t in library_targets(path)
                      if t.startswith("minattn.course")]
    assert not wrong, "\n".join(wrong)


def test_no_mechanism_and_no_fast_path_imports_the_course():
    wrong = [f"{p.relative_to(ROOT)} imports {t}" for p in library_files()
             if p.relative_to(LIBRARY).parts[0] != "course"
             for t in library_targets(p) if t.startswith("minattn.course")]
    assert not wrong, "\n".join(wrong)


def test_no_file_imports_another_files_private_names():
    wrong = [f"{path.relative_to(ROOT)}: from {module} import {name}"
             for path in library_files() + sorted((ROOT / "lessons").glob("*.py"))
             for module, names in imports(path) if module.startswith("minattn")
             for name in names if name.startswith("_") and not name.startswith("__")]
    assert not wrong, "\n".join(wrong)


def test_no_claims_registry():
    """Claims are decided in the lessons' cells (minattn.course.stats), not in claims files."""
    assert not [p for p in library_files() if p.name == "claims.py"]


def test_each_public_name_is_defined_once():
    """A fast twin has a name of its own (`em_fast_np`, not a second `em_np`)."""
    where = defaultdict(list)
    for path in library_files():
        if "answers" in path.parts:
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if (isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_")
                    and node.name != "main"):
                where[node.name].append(str(path.relative_to(ROOT)))
    twice = {name: files for name, files in where.items() if len(files) > 1}
    assert not twice, "\n".join(f"{n}: {f}" for n, f in sorted(twice.items()))


def test_the_audits_list_of_twins_names_functions_that_exist():
    """The give-away audit skips a pair whose function is gone: a rename must update the list."""
    from minattn.course.classroom.audit import TWINS
    defined = {node.name for path in library_files()
               for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
               if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    missing = sorted({name for pair in TWINS for name in pair} - defined)
    assert not missing, f"audit.TWINS names functions that no longer exist: {missing}"


def test_a_lesson_line_runs_past_100_columns_only_in_a_markdown_table():
    """pyproject.toml lets ruff pass long lines in the lessons with markdown tables (a table
    row cannot wrap); every other line there keeps the project's 100 columns."""
    long = [f"{p.name}:{i}: {len(line)} columns" for p in sorted((ROOT / "lessons").glob("*.py"))
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            if len(line) > 100 and not line.startswith("# |")]
    assert not long, "\n".join(long)


def test_a_lessons_experiment_reads_on_its_page():
    """The helper code a lesson reaches but never `show()`s is at most half of the lesson's own
    code: its loop, test-data rule and stopping rule are written or shown where the text
    explains them (tests/lesson_helper_share.py: the same measurement, as a script)."""
    from lesson_helper_share import MAX_SHARE, shares

    measured = shares(ROOT)
    assert len(measured) == len(list((ROOT / "lessons").glob("[0-9][0-9]_*.py"))) > 0
    above = [f"{name}: {hidden} hidden helper lines for {own} own ({hidden / own:.0%})"
             for name, (own, hidden) in measured.items() if hidden > MAX_SHARE * own]
    assert not above, "\n".join(above)
