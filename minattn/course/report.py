"""The course report: every paper claim the lessons decided, in one table.

Each lesson writes its claims to figures/<lesson>/claims.json (`Lesson.claim`); `make course`
collects them into figures/REPORT.md: the paper's number beside ours, the outcome, the claim's
power and its way to contradiction, the runs per arm, the finding in words and, for a claim not
tested, what its numbers alone would have said. The papers' claims are counted in one table,
the course's own findings and its readings of a paper's words in another.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from . import stats
from .pages import write_whole
from .stats import NOT_TESTED, OUTCOMES, RULE

FIELDS = ("claim", "paper", "ours", "outcome", "reason", "computed", "n", "finding", "detail",
          "why", "changed_after_run")
TABLES = (("paper", "The papers' claims"),
          ("own", "Our own findings and our readings of the papers' words"))


def _power(entry: dict) -> stats.Power | None:
    """The claim's recorded power, or (a record saved before power was recorded) its power
    computed again from its test at the effect the runs measured; None without a test."""
    if isinstance(entry.get("power"), dict):
        return stats.Power(**entry["power"])
    if isinstance(entry.get("test"), dict):
        return stats.power(entry["test"], entry.get("effect"))
    return None


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
                           "label": label, "kind": entry.get("kind") or "paper",
                           "not_run": (entry.get("test") or {}).get("test") == "not_run",
                           "power": _power(entry),
                           "smoke": bool(entry.get("smoke", False))})
    return claims


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _power_cells(p: stats.Power | None, not_run: bool) -> tuple[str, str]:
    """(power at the paper's effect, the way to contradiction) as two cells."""
    if not_run or p is None:
        return ("not run" if not_run else "", "")
    if p.reproduced is None:
        return p.label, p.note
    at = {"paper": "the paper's effect", "measured": "the measured effect",
          "claim": "the claim's value"}[p.source]
    way = f"contradicted with chance {p.contradicted:.2f} at {p.opposite}"
    return f"{p.label} at {at}", way + (f"; {p.note}" if p.note else "")


def _by_table(claims: list[dict]) -> list[tuple[str, str, list[dict]]]:
    """(key, title, claims) per table of TABLES: the papers' claims, then ours."""
    return [(key, title, [c for c in claims if (c["kind"] == "paper") == (key == "paper")])
            for key, title in TABLES]


def _outcome(c: dict, bold=lambda text: text) -> str:
    """A claim's outcome as both pages write it: our reading marked, a claim not tested with
    what its numbers alone said, a rule changed after a run with what it gave before."""
    outcome = bold(c["label"]) if c["outcome"] else "(none)"
    if c["kind"] == "reading":
        outcome = "our reading: " + outcome
    if (c["outcome"] == NOT_TESTED and c["computed"] and c["computed"] != NOT_TESTED
            and not c["not_run"]):
        outcome += f" (the numbers alone: {c['computed']})"
    if c["changed_after_run"]:
        outcome += f" (changed after a run was seen: {c['changed_after_run']})"
    return outcome


def claims_html(claims: list[dict]) -> str:
    """The claims as the index page shows them (`collect_claims`' rows): the papers' and ours
    apart, each row with its outcome, its finding, and its power and way to contradiction."""
    esc = html.escape

    def row(c):
        power, way = _power_cells(c["power"], c["not_run"])
        return ("<tr>" + "".join(f"<td>{esc(c[k])}</td>" for k in ("lesson", "claim", "paper"))
                + f"<td>{esc(c['ours'])}{' (smoke)' if c['smoke'] else ''}</td>"
                f"<td>{_outcome(c, lambda label: f'<b>{esc(label)}</b>')}<br>"
                f"{esc(c['finding'])}<br><small>runs per arm: {esc(c['n'])}; "
                f"{esc(c['detail'])}</small></td>"
                f"<td>{esc(power)}<br><small>{esc(way)}</small></td>"
                f"<td>{esc(c['why'])}</td></tr>")
    header = ("<table><tr><th>lesson</th><th>claim</th><th>paper</th><th>ours</th>"
              "<th>outcome</th><th>power</th><th>why they differ</th></tr>")
    return "".join(f"<h3>{esc(title)}</h3>{header}" + "".join(map(row, rows)) + "</table>"
                   for _, title, rows in _by_table(claims) if rows)


def _table(claims: list[dict]) -> list[str]:
    counts = {o: sum(c["outcome"] == o for c in claims) for o in OUTCOMES}
    missing = len(claims) - sum(counts.values())
    not_run = sum(c["not_run"] for c in claims)
    weak = sum(c["power"] is not None and c["power"].underpowered and not c["not_run"]
               for c in claims)
    lines = ["Outcomes: " + ", ".join(f"{n} {o}" for o, n in counts.items())
             + (f" (of which {not_run} not run: paper scale)" if not_run else "")
             + (f", {missing} without one" if missing else "")
             + f"; {weak} of {len(claims)} underpowered (below {stats.POWERED:g} at the "
             "effect given).", ""]
    lines += ["| lesson | claim | paper | ours | outcome | power | its way to contradiction | "
              "runs per arm | what the run found | from the numbers | why they differ |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in claims:
        ours = c["ours"] + (" (smoke)" if c["smoke"] else "")
        outcome = _outcome(c, lambda label: f"**{label}**")
        power, way = _power_cells(c["power"], c["not_run"])
        lines.append("| " + " | ".join(_cell(x) for x in (
            c["lesson"], c["claim"], c["paper"], ours, outcome, power, way, c["n"],
            c["finding"], c["detail"], c["why"])) + " |")
    return lines + [""]


def report_markdown(claims: list[dict]) -> str:
    """The report: the papers' claims in one table, the course's own findings and readings in
    another; a row per claim — lesson, claim, the paper's number, ours, the outcome (and for a
    claim not tested, what the numbers alone said), its power and way to contradiction, the
    finding, the numbers behind it."""
    lines = ["# Paper claims tested by the course", "",
             "Each row is a claim from a paper the course builds on, tested by a lesson at "
             "small scale: the paper's number beside the one the lesson measured and the "
             "outcome computed from the run's per-run numbers. Beside it, the claim's power: "
             "the chance these runs, at the spread they measured, come out reproduced at the "
             "paper's effect (or, where the lesson gives none, at the effect measured), and "
             "the chance they come out contradicted at the opposite effect. Written by `make "
             "course` (`python -m minattn.course.course`) from `figures/<lesson>/claims.json`.",
             "", f"**The rule for every outcome.** {RULE}", ""]
    if any(c["smoke"] for c in claims):
        lines += ["**Rows marked (smoke) come from a smoke-mode run (tiny sizes, few steps): "
                  "their numbers and outcomes are not the lesson's results.**", ""]
    if not claims:
        return "\n".join(lines + ["No lesson recorded a claim.", ""])
    for key, title, rows in _by_table(claims):
        if rows or key == "paper":
            lines += [f"## {title}", ""] + _table(rows)
    return "\n".join(lines)


def write_report(figure_root: Path, lessons: list[str] | None = None) -> tuple[Path, str]:
    """Collect the claims, write <figure_root>/REPORT.md, return (path, markdown)."""
    text = report_markdown(collect_claims(figure_root, lessons))
    figure_root = Path(figure_root)
    figure_root.mkdir(parents=True, exist_ok=True)
    path = figure_root / "REPORT.md"
    write_whole(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))  # Ctrl-C: the old one
    return path, text
