"""The course report: every paper claim the lessons decided, in one table.

Each lesson writes its claims to figures/<lesson>/claims.json (`Lesson.claim`); `make course`
collects them into figures/REPORT.md: the paper's number beside ours, the outcome, the runs per
arm, the finding in words and, for a claim not tested, what its numbers alone would have said.
"""

from __future__ import annotations

import json
from pathlib import Path

from .pages import write_whole
from .stats import OUTCOMES, RULE

FIELDS = ("claim", "paper", "ours", "outcome", "reason", "computed", "n", "finding", "detail",
          "why")


def collect_claims(figure_root: Path, lessons: list[str] | None = None) -> list[dict]:
    """Every claim in <figure_root>/<lesson>/claims.json (all lessons, or those named)."""
    claims = []
    for path in sorted(Path(figure_root).glob("*/claims.json")):
        if lessons is not None and path.parent.name not in lessons:
            continue
        try:
            entries = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            print(f"warning: skipping unreadable {path}: {exc}")
            continue
        for entry in entries:
            c = {k: str(entry.get(k) or "") for k in FIELDS}
            label = c["outcome"] + (f" ({c['reason']})" if c["reason"] else "")
            claims.append({"lesson": entry.get("lesson", path.parent.name), **c,
                           "label": label,
                           "smoke": bool(entry.get("smoke", False))})
    return claims


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def report_markdown(claims: list[dict]) -> str:
    """The report: a row per claim — lesson, claim, the paper's number, ours, the outcome (and
    for a claim not tested, what the numbers alone said), the finding, the numbers behind it."""
    lines = ["# Paper claims tested by the course", "",
             "Each row is a claim from a paper the course builds on, tested by a lesson at "
             "small scale: the paper's number beside the one the lesson measured and the "
             "outcome computed from the run's per-run numbers. Written by `make course` "
             "(`python -m minattn.course.course`) from `figures/<lesson>/claims.json`.", "",
             f"**The rule for every outcome.** {RULE}", ""]
    if any(c["smoke"] for c in claims):
        lines += ["**Rows marked (smoke) come from a smoke-mode run (tiny sizes, few steps): "
                  "their numbers and outcomes are not the lesson's results.**", ""]
    if not claims:
        return "\n".join(lines + ["No lesson recorded a claim.", ""])
    counts = {o: sum(c["outcome"] == o for c in claims) for o in OUTCOMES}
    missing = len(claims) - sum(counts.values())
    lines += ["Outcomes: " + ", ".join(f"{n} {o}" for o, n in counts.items())
              + (f", {missing} without one" if missing else "") + ".", ""]
    lines += ["| lesson | claim | paper | ours | outcome | runs per arm | what the run found | "
              "from the numbers | why they differ |", "|---|---|---|---|---|---|---|---|---|"]
    for c in claims:
        ours = c["ours"] + (" (smoke)" if c["smoke"] else "")
        outcome = f"**{c['label']}**" if c["outcome"] else "(none)"
        if c["outcome"] == "not tested" and c["computed"] and c["computed"] != "not tested":
            outcome += f" (the numbers alone: {c['computed']})"
        lines.append("| " + " | ".join(_cell(x) for x in (
            c["lesson"], c["claim"], c["paper"], ours, outcome, c["n"], c["finding"],
            c["detail"], c["why"])) + " |")
    return "\n".join(lines) + "\n"


def write_report(figure_root: Path, lessons: list[str] | None = None) -> tuple[Path, str]:
    """Collect the claims, write <figure_root>/REPORT.md, return (path, markdown)."""
    text = report_markdown(collect_claims(figure_root, lessons))
    figure_root = Path(figure_root)
    figure_root.mkdir(parents=True, exist_ok=True)
    path = figure_root / "REPORT.md"
    write_whole(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))  # Ctrl-C: the old one
    return path, text
