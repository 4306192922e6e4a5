"""Grading: each submission's exercise regions, and nothing else, run against the teacher's tests.

    python -m minattn.tools.exercises grade alice/ bob/ --out grades.csv [--only 1.1] [--timeout S]

For each submission folder (a student copy the student worked in), a fresh copy of the teacher's
repository is made with the bodies of the handed-out exercise regions taken from the submission
(matched by id and order); the submission's tests, helpers or other edits are never used. The
teacher's exercise tests run there, hidden ones (tests/hidden/) included, in their own process
with a time limit: a submission that hangs or crashes gives failed rows, never a crashed grader.
The gradebook has one row per submission and exercise: passed, total, first failure.
"""

from __future__ import annotations

import csv
import json
import tempfile
from pathlib import Path

from . import REPO_ROOT
from .exercises import (BEGIN, _pytest, _short, all_exercises, by_id, descriptions, expand_ids,
                        find_exercises, n_run, read_manifest, source_files, stub_message)


def _regions_by_id(text: str) -> dict[str, list[tuple[int, int]]]:
    """id -> [(BEGIN line index, END line index)] (0-based), in file order."""
    out: dict[str, list[tuple[int, int]]] = {}
    for e in find_exercises(text):
        out.setdefault(e.id, []).append((e.line - 1, e.end - 1))
    return out


def splice(teacher_text: str, submission_text: str | None, ids: set[str],
           what: dict[str, str]) -> tuple[str, list[str]]:
    """The teacher's file with the bodies of the `ids` regions taken from the submission's file
    (matched by id and order). A region the submission lacks becomes a NotImplementedError stub.
    Returns (text, notes)."""
    notes = []
    try:
        theirs = _regions_by_id(submission_text) if submission_text is not None else {}
        their_lines = submission_text.splitlines(keepends=True) if submission_text else []
    except ValueError as err:
        theirs, their_lines = {}, []
        notes.append(f"markers broken in the submission ({err})")
    lines = teacher_text.splitlines(keepends=True)
    seen: dict[str, int] = {}
    replacements = []
    for e in find_exercises(teacher_text):
        if e.id not in ids:
            continue
        k = seen[e.id] = seen.get(e.id, -1) + 1
        if k < len(theirs.get(e.id, [])):
            b, en = theirs[e.id][k]
            body = their_lines[b + 1:en]
        else:
            indent = BEGIN.match(lines[e.line - 1])["indent"]
            literal = json.dumps(stub_message(e.id, what.get(e.id, "")), ensure_ascii=False)
            body = [f"{indent}raise NotImplementedError({literal})\n"]
            notes.append(f"region {e.id} #{k + 1} missing in the submission")
        replacements.append((e.line - 1, e.end - 1, body))
    for b, en, body in reversed(replacements):
        lines[b + 1:en] = body
    return "".join(lines), notes


def build_graded_copy(submission: Path, dest: Path, ids: list[str], root: Path = REPO_ROOT) -> list[str]:
    """A fresh copy of the teacher's repository (hidden tests included) with the submission's
    region bodies for `ids` spliced in; nothing else of the submission is used."""
    exercises = all_exercises(root)
    what = descriptions(exercises)
    paths = {str(e.path) for e in exercises if e.id in ids}
    notes = []
    for rel in source_files(root, student=False):
        data = (root / rel).read_bytes()
        if rel in paths:
            theirs = Path(submission) / rel
            text, n = splice(data.decode(), theirs.read_text(errors="replace") if theirs.is_file()
                             else None, set(ids), what)
            data = text.encode()
            notes += [f"{rel}: {x}" for x in n]
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_bytes(data)
    return notes


def grade(submissions: list[Path], out: Path | None = None, only=None, timeout: float = 600,
          root: Path = REPO_ROOT) -> list[dict]:
    """Grade each submission folder against the teacher's exercise tests (hidden included);
    write a CSV gradebook to `out`; return its rows."""
    root = Path(root)
    groups = by_id(all_exercises(root))
    forced = expand_ids(only, groups) if only else None
    submissions = [Path(s) for s in submissions]
    for s in submissions:
        if not s.is_dir():
            raise ValueError(f"submission {s} is not a folder")
    teacher_counts: dict[str, int] = {}

    def expected(ex_id: str) -> int:  # the teacher's own count: for runs that broke early
        if not teacher_counts:
            with tempfile.TemporaryDirectory() as tmp:
                _, _, collected, _ = _pytest(root, ["tests", "--collect-only", "-q", "--exercises"],
                                             Path(tmp) / "collect.json", capture=True, timeout=timeout)
            teacher_counts.update({k: len(v.get("tests", []))
                                   for k, v in collected.get("exercises", {}).items()})
            teacher_counts.setdefault("", 0)
        return teacher_counts.get(ex_id, 0)

    rows = []
    for s in submissions:
        manifest = read_manifest(s)
        ids = forced or [i for i in (manifest or {}).get("exercises", list(groups)) if i in groups]
        name = s.name
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / "graded"
            notes = build_graded_copy(s, copy, ids, root)
            rc, output, results, timed_out = _pytest(
                copy, ["tests", "-q", "--tb=line", "--exercises", *ids],
                Path(tmp) / "report.json", capture=True, timeout=timeout)
        exercises = results.get("exercises", {})
        errors = results.get("errors", [])
        if timed_out:
            why = f"timed out after {timeout:g} s (in {results.get('running') or 'collection'})"
        elif rc not in (0, 1):
            why = f"test run crashed (exit code {rc}) in {results.get('running') or 'collection'}"
        else:
            why = "did not run"
        complete = rc in (0, 1) and not timed_out and not errors
        for ex_id in ids:
            counts = exercises.get(ex_id, {})
            passed = counts.get("passed", 0)
            total = n_run(counts) if complete else max(expected(ex_id), n_run(counts))
            first = counts.get("first_failure")
            if first is None and passed < total:
                first = (f"error collecting {errors[0]['where']}: {errors[0]['message']}"
                         if errors else why)
            rows.append(dict(submission=name, exercise=ex_id, passed=passed, total=total,
                             first_failure=_short(first or "", 300)))
        if notes:
            print(f"{name}: " + "; ".join(notes))
    if out is not None:
        with open(out, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=["submission", "exercise", "passed", "total",
                                                   "first_failure"])
            writer.writeheader()
            writer.writerows(rows)
    _print_grades(rows)
    if out is not None:
        print(f"gradebook: {out}")
    return rows


def _print_grades(rows: list[dict]) -> None:
    print(f"\n{'submission':20}{'exercise':9}{'tests':8}first failure")
    for r in rows:
        print(f"{r['submission'][:19]:20}{r['exercise']:9}{r['passed']}/{r['total']:<6}"
              f"{_short(r['first_failure'], 80)}")
    print()
    for name in dict.fromkeys(r["submission"] for r in rows):
        mine = [r for r in rows if r["submission"] == name]
        done = sum(r["passed"] == r["total"] > 0 for r in mine)
        print(f"{name}: {done}/{len(mine)} exercises pass "
              f"({sum(r['passed'] for r in mine)}/{sum(r['total'] for r in mine)} tests)")
