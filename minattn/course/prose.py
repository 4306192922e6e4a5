"""The prose says what the run printed: find the decimal numbers a lesson's markdown states
that its output does not contain.

A lesson's markdown may state a number in three ways:
- a number the run prints (a result, a paper's number shown in a printed table): it must
  appear in the output the markdown sits beside;
- an approximate number, marked "about", "≈", "~", "roughly", "around", "nearly" or "almost":
  stable across machines and seeds, checked against a full-mode run's output to within 5 %
  (`make course`), not against a smoke run's;
- a constant that is neither (a hyper-parameter, a paper's number quoted in the text only):
  named in the caller's allow-list.

Only decimals are checked ("0.107", "85.9 %"): integers count steps, seeds and sizes far more
often than results. Numbers in code spans and code blocks, in section, table, figure, equation
and version references ("§6.1", "Table 2.1", "torch 2.13.0"), exercise ids and URLs
are not statements.

    python -m minattn.course.prose lessons/05_lstm_attention.py output.txt
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

APPROX = re.compile(r"(about|≈|~|∼|roughly|around|nearly|almost|approximately|some)\s*$",
                    re.IGNORECASE)
REFERENCE = re.compile(r"(§|\bsections?|\bsec\.|\bappendix|\btables?|\bfig\.|\bfigures?|\beq\.|"
                       r"\bequations?|\barxiv:?|\bversion|\bv|\btorch|\bpython|\blesson|"
                       r"\bexercises?|\bitem)\s*(\d+(\.\d+)*\s*[–-]\s*)?$", re.IGNORECASE)
EXERCISE_ID = re.compile(r"(^|\n)\s*([*-]\s+)?\*\*$")  # "**1.1 — implement ..." at a line's start
DECIMAL = re.compile(r"(?<![\w.])([−-]?)(\d+\.\d+)(?![\w.]*\d)")
NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
# How `show()` prints a library source in a script run (tools/lesson.py): code, not results,
# so its numbers never vouch for the prose.
SOURCE_HEADER = "# ---- source: "
SOURCE_FOOTER = "# ---- end of source"
SHOWN_SOURCE = re.compile(rf"^{re.escape(SOURCE_HEADER)}.*?^{re.escape(SOURCE_FOOTER)}$",
                          re.M | re.S)


@dataclass(frozen=True)
class Stated:
    """A decimal stated in a lesson's markdown."""

    text: str        # as written, e.g. "0.107"
    value: float     # its absolute value
    decimals: int    # digits after the point
    approx: bool     # marked "about", "≈", ...
    percent: bool    # followed by "%"
    context: str     # the words around it, to find it in the lesson


def markdown_cells(lesson: Path) -> list[str]:
    """The markdown cells of a jupytext percent-format lesson (comment marks removed)."""
    cells, current, in_markdown = [], [], False
    for line in Path(lesson).read_text(encoding="utf-8").splitlines():
        if line.startswith("# %%"):
            if in_markdown:
                cells.append("\n".join(current))
            current, in_markdown = [], "[markdown]" in line
            continue
        if in_markdown:
            current.append(line[2:] if line.startswith("# ") else line.lstrip("#"))
    if in_markdown:
        cells.append("\n".join(current))
    return cells


def _strip_code_and_links(text: str) -> str:
    text = re.sub(r"```.*?```", " ", text, flags=re.DOTALL)
    text = re.sub(r"`[^`]*`", " ", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)                  # link targets
    text = re.sub(r"https?://\S+", " ", text)
    return text


def stated_numbers(markdown: str) -> list[Stated]:
    """Every decimal the markdown states as a number (see the module docstring)."""
    text = _strip_code_and_links(markdown)
    found = []
    for m in DECIMAL.finditer(text):
        before = text[max(0, m.start() - 16):m.start()]
        if REFERENCE.search(before) or EXERCISE_ID.search(before):
            continue
        digits = m.group(2)
        after = text[m.end():m.end() + 3]
        found.append(Stated(
            text=m.group(1) + digits, value=float(digits),
            decimals=len(digits.split(".")[1]), approx=bool(APPROX.search(before)),
            percent=after.lstrip().startswith("%"),
            context=" ".join(text[max(0, m.start() - 40):m.end() + 30].split())))
    return found


def printed_numbers(output: str) -> list[float]:
    """The absolute values of every number in a run's output (sources that `show()` printed
    left out)."""
    values = []
    for m in NUMBER.finditer(SHOWN_SOURCE.sub("", output).replace("−", "-")):
        try:
            value = abs(float(m.group()))
        except ValueError:
            continue
        if math.isfinite(value):
            values.append(value)
    return values


def _matches(stated: Stated, printed: list[float], approx_tolerance: float) -> bool:
    """Does a printed number round to `stated` at its precision? A fraction and a percentage
    of the same quantity match ("84.2 %" and a printed 0.842, "0.842" and a printed 84.2)."""
    step = 10.0 ** -stated.decimals
    for target, unit in ((stated.value, step), (stated.value / 100, step / 100),
                         (stated.value * 100, step * 100)):
        for value in printed:
            if stated.approx:
                if abs(value - target) <= max(approx_tolerance * target, unit):
                    return True
            elif abs(value - target) <= unit / 2 + 1e-9 * unit:
                return True
    return False


def unsupported(lesson: Path, output: str, allow: set[str] | frozenset = frozenset(),
                check_approx: bool = False, approx_tolerance: float = 0.05) -> list[Stated]:
    """The decimals `lesson`'s markdown states that `output` does not contain.

    A stated number matches a printed one that rounds to it at the stated precision (or, for
    a percentage, a printed fraction that does). Approximate numbers are checked only with
    `check_approx` (against a full-mode output), to within `approx_tolerance` relative.
    Numbers whose text is in `allow` are constants the caller vouches for.
    """
    printed = printed_numbers(output)
    missing = []
    for cell in markdown_cells(lesson):
        for stated in stated_numbers(cell):
            if stated.text.lstrip("−-") in allow or (stated.approx and not check_approx):
                continue
            if not _matches(stated, printed, approx_tolerance):
                missing.append(stated)
    return missing


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m minattn.course.prose LESSON.py OUTPUT.txt", file=sys.stderr)
        return 2
    lesson, output = Path(args[0]), Path(args[1]).read_text(encoding="utf-8", errors="replace")
    missing = unsupported(lesson, output, check_approx=True)
    for s in missing:
        print(f"{lesson.name}: {s.text}{' (approx.)' if s.approx else ''} not in the output: "
              f"…{s.context}…")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
