"""How much of each lesson's experiment lives in helper code the lesson never shows.

    python tests/lesson_helper_share.py [MAX_SHARE]

For every lessons/NN_*.py: the experiment helpers it uses (modules of minattn/course/ other than
the runtime in RUNTIME), followed through each helper module's own calls; the code lines (not
blank, comment or docstring) of what it reaches minus what it `show()`s, as a share of the
lesson's own code-cell lines. Prints one line per lesson and a summary; exits 1 when a lesson's
share is above MAX_SHARE (default 0.50). Pure AST: nothing is imported or run.
tests/test_layout.py holds every lesson to the same bound.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_SHARE = 0.50
# What every lesson uses and no experiment is: the lesson runtime, statistics, figures, tables,
# data loading, benchmarking, the course build and the classroom.
RUNTIME = {"lesson", "stats", "report", "plots", "tables", "utils", "data", "fetch", "bench",
           "checkout", "pages", "course", "prose", "gpu_tier", "classroom", "__init__"}
SHOWN = re.compile(r"(?<![\w.])show\(([^)]*)\)")  # show(fn, module.fn, ...): every name shown


def is_code(line: str) -> bool:
    return bool(line.strip()) and not line.strip().startswith("#")


class Helper:
    """One helper module: its top-level functions and classes, what each uses, its code lines."""

    def __init__(self, path: Path):
        self.lines = path.read_text(encoding="utf-8").splitlines()
        tree = ast.parse("\n".join(self.lines))
        self.defs = {n.name: n for n in tree.body
                     if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        self.uses, self.doc = {}, set()  # name -> the names it uses; docstring line numbers
        for name, node in self.defs.items():
            used = self.uses[name] = set()
            for x in ast.walk(node):  # one pass per definition: what it uses, its docstrings
                if isinstance(x, ast.Name):
                    used.add(x.id)
                elif isinstance(x, ast.Attribute):
                    used.add(x.attr)
                elif isinstance(x, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                        and x.body and isinstance(x.body[0], ast.Expr) \
                        and isinstance(x.body[0].value, ast.Constant) \
                        and isinstance(x.body[0].value.value, str):
                    self.doc.update(range(x.body[0].lineno, x.body[0].end_lineno + 1))

    def reach(self, names: set[str]) -> set[str]:
        """The definitions `names` need, through the module's own calls."""
        seen, todo = set(), [n for n in names if n in self.defs]
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo += [m for m in self.uses[name] if m in self.defs and m not in seen]
        return seen

    def code(self, name: str) -> int:
        """Code lines of a definition (a class with its methods)."""
        node = self.defs[name]
        return sum(1 for k in range(node.lineno, node.end_lineno + 1)
                   if is_code(self.lines[k - 1]) and k not in self.doc)


def lesson_code_lines(source: str) -> int:
    kind, n = None, 0
    for line in source.splitlines():
        if line.startswith("# %%"):
            kind = "markdown" if "[markdown]" in line else "code"
        elif kind == "code" and is_code(line):
            n += 1
    return n


def helper_names(tree: ast.AST, helpers: dict[str, Path]) -> dict[str, set[str]]:
    """{helper stem: the names a lesson takes from it}, by `from minattn.course.x import a` or
    `import minattn.course.x as m` / `from minattn.course import x` then `m.a`."""
    used, aliases, attributes = {}, {}, []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("minattn.course."):
            stem = node.module.split(".")[2]
            if stem in helpers:
                used.setdefault(stem, set()).update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module == "minattn.course":
            aliases.update({a.asname or a.name: a.name for a in node.names if a.name in helpers})
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("minattn.course.") and a.name.split(".")[2] in helpers:
                    aliases[a.asname or a.name] = a.name.split(".")[2]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            attributes.append((node.value.id, node.attr))
    for module, attr in attributes:
        if module in aliases:
            used.setdefault(aliases[module], set()).add(attr)
    return used


def shares(root: Path = ROOT) -> dict[str, tuple[int, int]]:
    """{lesson file name: (its own code lines, helper code lines it reaches but never shows)}."""
    helpers = {p.stem: p for p in (root / "minattn" / "course").glob("*.py")
               if p.stem not in RUNTIME}
    parsed: dict[str, Helper] = {}  # each helper module parsed once
    out = {}
    for lesson in sorted((root / "lessons").glob("[0-9][0-9]_*.py")):
        source = lesson.read_text(encoding="utf-8")
        shown = {name.strip().split(".")[-1] for args in SHOWN.findall(source)
                 for name in args.split(",")}
        hidden = 0
        for stem, names in helper_names(ast.parse(source), helpers).items():
            if stem not in parsed:
                parsed[stem] = Helper(helpers[stem])
            helper = parsed[stem]
            hidden += sum(helper.code(n) for n in helper.reach(names) if n not in shown)
        out[lesson.name] = (lesson_code_lines(source), hidden)
    return out


def main(max_share: float = MAX_SHARE) -> int:
    above = []
    for name, (own, hidden) in shares().items():
        share = hidden / max(own, 1)
        print(f"{name:24s} own code {own:4d}; helper code reached, not shown {hidden:4d} "
              f"({share:.0%})")
        if share > max_share:
            above.append(f"{Path(name).stem} {share:.0%}")
    print(f"above {max_share:.0%}: " + (", ".join(above) if above else "none"))
    return 1 if above else 0


if __name__ == "__main__":
    sys.exit(main(float(sys.argv[1]) if len(sys.argv) > 1 else MAX_SHARE))
