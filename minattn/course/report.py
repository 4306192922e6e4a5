"""The course report: every paper claim the lessons recorded, in one table.

Each lesson writes its claims to figures/<lesson>/claims.json (`Lesson.claim`); `make course`
collects them into figures/REPORT.md: the paper's number beside ours, the outcome the claim's
rule computed, the runs per arm, the finding in words and the numbers behind it.
"""

from __future__ import annotations

import json
from pathlib import Path

from .verdict import OUTCOMES, RULE

CLAIM_FIELDS = ("claim", "paper", "ours", "verdict", "reason", "n", "finding", "detail", "why")


def collect_claims(figure_root: Path, lessons: list[str] | None = None) -> list[dict]:
    """Every claim in <figure_root>/<lesson>/claims.json (all lessons, or those named)."""
    claims = []
    for path in sorted(figure_root.glob("*/claims.json")):
        if lessons is not None and path.parent.name not in lessons:
            continue
        try:
            entries = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            print(f"warning: skipping unreadable {path}: {exc}")
            continue
        for entry in entries:
            c = {k: str(entry.get(k, "")) for k in CLAIM_FIELDS}
            claims.append({"lesson": entry.get("lesson", path.parent.name), **c,
                           "smoke": bool(entry.get("smoke", False)),  # 'not tested (smoke)':
                           "outcome": c["verdict"] + (f" ({c['reason']})" if c["reason"] else "")})
    return claims


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def report_markdown(claims: list[dict]) -> str:
    """The report: a row per claim — lesson, claim, the paper's number, ours, the verdict with
    the numbers it was computed from, and why the two differ."""
    lines = ["# Paper claims tested by the course", "",
             "Each row is a claim from a paper the course builds on, tested by a lesson at "
             "small scale: the paper's number beside the one the lesson measured, a verdict "
             "computed from the measured numbers, and why the two differ. Written by "
             "`make course` (`python -m minattn.course.course`) from "
             "`figures/<lesson>/claims.json`.", "",
             f"**The rule for every verdict.** {RULE}", ""]
    if any(c["smoke"] for c in claims):
        lines += ["**Rows marked (smoke) come from a smoke-mode run (tiny sizes, few steps): "
                  "their numbers and verdicts are not the lesson's results.**", ""]
    if not claims:
        return "\n".join(lines + ["No lesson recorded a claim.", ""])
    counts = {v: sum(c["verdict"] == v for c in claims) for v in OUTCOMES}
    missing = len(claims) - sum(counts.values())
    lines += ["Outcomes: " + ", ".join(f"{n} {v}" for v, n in counts.items())
              + (f", {missing} without one" if missing else "") + ".", ""]
    lines += ["| lesson | claim | paper | ours | outcome | runs per arm | what the run found | "
              "from the numbers | why they differ |", "|---|---|---|---|---|---|---|---|---|"]
    for c in claims:
        ours = c["ours"] + (" (smoke)" if c["smoke"] else "")
        lines.append("| " + " | ".join(_cell(x) for x in (
            c["lesson"], c["claim"], c["paper"], ours,
            f"**{c['outcome']}**" if c["verdict"] else "(none)", c["n"], c["finding"],
            c["detail"], c["why"])) + " |")
    return "\n".join(lines) + "\n"


def write_report(figure_root: Path, lessons: list[str] | None = None) -> tuple[Path, str]:
    """Collect the claims, write <figure_root>/REPORT.md, return (path, markdown)."""
    text = report_markdown(collect_claims(figure_root, lessons))
    figure_root.mkdir(parents=True, exist_ok=True)
    path = figure_root / "REPORT.md"
    path.write_text(text, encoding="utf-8")
    return path, text
