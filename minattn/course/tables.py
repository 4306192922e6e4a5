"""Formatting numbers and Markdown tables for benchmarks and data scripts (no torch import)."""

from __future__ import annotations


def fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    return f"{seconds * 1e3:.2f} ms" if seconds < 1 else f"{seconds:.2f} s"


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return "—"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def markdown_table(rows: list[dict], columns: list[str]) -> str:
    """Rows (dicts) as a Markdown table with the given columns."""
    header = "| " + " | ".join(columns) + " |"
    rule = "|" + "|".join("---" for _ in columns) + "|"
    lines = [header, rule]
    for row in rows:
        lines.append("| " + " | ".join(str(row.get(c, "")) for c in columns) + " |")
    return "\n".join(lines)


def print_table(rows: list[dict], columns: list[str]) -> str:
    """Print rows (dicts) as a Markdown table with the given columns; returns the text."""
    text = markdown_table(rows, columns)
    print(text)
    return text
