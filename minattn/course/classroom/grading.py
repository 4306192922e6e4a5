"""Grading: the handed-out exercises of each submission, run against the teacher's tests.

    python -m minattn.course.classroom grade SUB... --only 1.1 1.2 --out grades.csv
    python -m minattn.course.classroom grade SUB... --roster roster.txt [--name NAME...] \
        [--timeout S] [--resume]

What is graded comes from the teacher: `--only` ids (or lesson numbers), or a roster file (the
ids, or lesson numbers, separated by spaces or lines; `#` starts a comment). A submission's own
manifest is never read.

For each submission, one at a time:
1. its graded copy: the teacher's `minattn/` (tracked files only) with the bodies of the graded
   regions taken from the submission (matched by id and order), nothing else of it. A region
   the submission lacks, or whose markers are broken, is a NotImplementedError stub, and the
   gradebook says which marker is missing where ("END marker missing in minattn/attention.py");
   the teacher's solution never stands in for it.
2. the teacher's tests (hidden ones included) run in a copy of the teacher's repository, in
   their own process, with the graded functions routed to a worker process that imports the
   graded copy, inside the bubblewrap sandbox of sandbox.py (plugin.py states the threat
   model). The worker sees only that copy; not the teacher's checkout, the other
   submissions, the gradebook, the network, or the grader's processes.
3. a time limit for the whole run, after which its process group is killed.

Each submission's rows go into the gradebook as soon as it is graded: Ctrl-C (or SIGTERM)
keeps everyone graded before it, names who was not, and the same command with `--resume`
grades only those (the rows already there are kept). A predict or experiment answer of the
wrong form fails its tests with what the question asks for (check.answer_problem, the
student's check's words), not with the error the teacher's comparison would raise.

Pass or fail is what pytest observed in the teacher's process. `total` is the teacher's count
of tests for that exercise (collected from the teacher's tests, before any student code ran);
a test that failed, errored, was skipped or did not run counts as not passed.

Gradebook rows are named by the submission's path relative to the submissions' common parent
(`a/alice`, `b/alice`), or by `--name`; two submissions with one name are refused.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from .. import REPO_ROOT
from .check import run_pytest, short
from .copies import read_copy_manifest, source_files
from .regions import all_exercises, descriptions, expand_ids, splice
from .sandbox import INSIDE, UNSAFE, bwrap_problem, check_start, python_executable

FIELDS = ["submission", "exercise", "passed", "total", "first_failure"]
COLLECTION = 300  # seconds allowed for collecting the teacher's tests, before any submission
# Seconds one call of a student's function may take (a tenth of --timeout at most), and more
# for the first call of a new process, which imports the submission (a quarter at most): a hang
# fails its exercise's tests, and the submission's other exercises still run.
CALL_TIMEOUT, START_TIMEOUT = 60, 60
WORKER = "from minattn.course.classroom.worker import serve; serve()"  # in the sandbox, in the copy


# ============================================================================ what is graded
def read_roster(path: Path) -> list[str]:
    """The exercise ids (or lesson numbers) a roster file lists."""
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise ValueError(f"cannot read the roster {path}: {err}") from None
    items = [tok for line in text.splitlines() for tok in line.split("#", 1)[0].split()]
    if not items:
        raise ValueError(f"the roster {path} lists no exercise")
    return items


def graded_ids(only=None, roster: Path | None = None, root: Path = REPO_ROOT) -> list[str]:
    """The teacher's list of graded exercises: --only or a roster, never a submission's manifest."""
    if bool(only) == bool(roster):
        raise ValueError("say which exercises were handed out: --only 1.1 1.2 (ids or lesson "
                         "numbers) or --roster FILE (one of them); a submission's own list is "
                         "never used")
    return expand_ids(only or read_roster(roster), {e.id for e in all_exercises(root)})


def submission_names(submissions, names=None) -> list[str]:
    """One unique gradebook name per submission: `names` if given, else each path relative to
    the submissions' common parent. ValueError on a collision or a submission given twice."""
    paths = [Path(s).resolve() for s in submissions]
    for s, p in zip(submissions, paths):
        if not p.is_dir():
            raise ValueError(f"submission {s} is not a folder")
    for i, p in enumerate(paths):
        for j, q in enumerate(paths):
            if i < j and p == q:
                raise ValueError(f"submission {submissions[i]} is given twice ({submissions[j]})")
            if i != j and p in q.parents:
                raise ValueError(f"submission {submissions[j]} lies inside submission "
                                 f"{submissions[i]}")
    if names:
        if len(names) != len(paths):
            raise ValueError(f"--name gives {len(names)} names for {len(paths)} submissions")
        names = [str(n).strip() for n in names]
    else:
        common = Path(os.path.commonpath(paths)) if len(paths) > 1 else paths[0].parent
        names = [p.relative_to(common).as_posix() if p != common else p.name for p in paths]
    seen: dict[str, int] = {}
    for i, n in enumerate(names):
        if not n or any(c in n for c in "\n\r\0"):
            raise ValueError(f"submission {submissions[i]}: the name {n!r} cannot go in a "
                             "gradebook")
        if n in seen:
            raise ValueError(f"submissions {submissions[seen[n]]} and {submissions[i]} would both "
                             f"be named {n!r} in the gradebook; give each a --name")
        seen[n] = i
    return names


def build_graded_copy(submission: Path, dest: Path, ids, root: Path = REPO_ROOT,
                      library_only: bool = True) -> dict[str, list[str]]:
    """The teacher's files (tracked; with `library_only`, only minattn/) with the submission's
    region bodies for `ids` spliced in; nothing else of the submission is read. Returns the
    marker problems per exercise."""
    exercises = all_exercises(root)
    what = descriptions(exercises)
    paths = {str(e.path) for e in exercises if e.id in ids}
    notes: dict[str, list[str]] = {}
    inside = Path(submission).resolve()
    for rel in source_files(root, student=library_only, tracked_only=True):
        if library_only and not rel.startswith("minattn/"):
            continue
        data = (root / rel).read_bytes()
        if rel in paths:
            theirs = Path(submission) / rel
            # a link (or a linked folder) could point at the teacher's own solutions
            their_text = (theirs.read_text(errors="replace") if theirs.is_file()
                          and theirs.resolve() == inside / rel else None)
            text, n = splice(data.decode(), their_text, set(ids), what, rel)
            data = text.encode()
            for k, v in n.items():
                notes.setdefault(k, []).extend(v)
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_bytes(data)
    return notes


def copy_teacher(root: Path, dest: Path) -> None:
    """The teacher's repository (tests and hidden tests included) where the tests run."""
    for rel in source_files(root, student=False):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, dest / rel)


def exercise_test_files(teacher: Path, ids) -> list[str]:
    """The test files that mention one of `ids` (quoted): only these are imported."""
    pattern = re.compile("|".join(rf"""["']{re.escape(i)}["']""" for i in ids))
    return sorted(str(p.relative_to(teacher)) for p in (teacher / "tests").rglob("test_*.py")
                  if pattern.search(p.read_text(errors="replace")))


# ============================================================================ grading
def read_gradebook(path: Path) -> list[dict]:
    """The rows of a gradebook this grader wrote (ValueError for anything else)."""
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            rows = list(reader)
    except OSError as err:
        raise ValueError(f"cannot resume the gradebook {path}: {err}") from None
    if reader.fieldnames != FIELDS:
        raise ValueError(f"cannot resume {path}: its header is not the gradebook's "
                         f"({','.join(FIELDS)})")
    return rows


class Gradebook:
    """grades.csv written as grading goes: with the first submission graded, the header and any
    rows kept from an earlier run; then each submission's rows appended (and flushed) as soon
    as it is graded, so that an interrupted grading keeps everyone graded before it (and one
    that stops before grading anyone leaves the file as it was)."""

    def __init__(self, out: Path | None, kept: list[dict]):
        self.out, self.kept, self.started = out, kept, False

    def add(self, rows: list[dict]) -> None:
        if self.out is None:
            return
        if not self.started:
            tmp = self.out.with_name(self.out.name + ".tmp")
            with open(tmp, "w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=FIELDS)
                writer.writeheader()
                writer.writerows(self.kept)
            tmp.replace(self.out)
            self.started = True
        with open(self.out, "a", newline="") as f:
            csv.DictWriter(f, fieldnames=FIELDS).writerows(rows)
            f.flush()
            os.fsync(f.fileno())


def grade(submissions, out: Path | None = None, only=None, timeout: float = 600,
          root: Path = REPO_ROOT, roster: Path | None = None, names=None,
          unsafe: bool = False, hide=(), resume: bool = False) -> list[dict]:
    """Grade each submission folder on the teacher's exercises (see the module docstring);
    write the CSV gradebook to `out`, each submission's rows as soon as it is graded; return
    its rows. `resume`: keep the submissions `out` already grades in full and grade only the
    others (after an interrupted grading). `hide`: more folders the sandbox hides (the
    teacher's checkout, the submissions and the gradebook's folder always are)."""
    root = Path(root).resolve()
    ids = graded_ids(only, roster, root)
    folders = [s for s in submissions if Path(s).is_dir()]
    for s in submissions:  # a .zip or a note among the submissions: said, and left alone
        if not Path(s).is_dir():
            print(f"skipped {s}: not a folder (unpack a submission into a folder of its own)")
    if not folders:
        raise ValueError("no submission to grade: each must be a folder (a student's copy)")
    if names and len(folders) < len(submissions):
        names = [n for s, n in zip(submissions, names) if Path(s).is_dir()] \
            if len(names) == len(submissions) else names
    submissions = folders
    names = submission_names(submissions, names)
    submissions = [Path(s).resolve() for s in submissions]
    for s in submissions:
        if s == root or s in root.parents:
            raise ValueError(f"submission {s} is (or holds) the teacher's checkout {root}")
    if out is not None:
        out = Path(out).resolve()
        for s in submissions:
            if out == s or s in out.parents:
                raise ValueError(f"the gradebook {out} would lie inside submission {s}")
    kept = []
    if resume:
        if out is None or not out.is_file():
            raise ValueError(f"--resume: there is no gradebook to resume at {out}")
        earlier = read_gradebook(out)
        done = {n for n in names if {r["exercise"] for r in earlier if r["submission"] == n}
                >= set(ids)}
        kept = [r for r in earlier if r["submission"] in done]
        left = [(n, s) for n, s in zip(names, submissions) if n not in done]
        print(f"resuming {out}: {len(done)} submissions graded already, {len(left)} to grade")
        names, submissions = [n for n, _ in left], [s for _, s in left]
    if not unsafe and (problem := bwrap_problem()) is not None:
        raise ValueError(f"refusing to run students' code without a sandbox: {problem}. "
                         f"To grade anyway: {UNSAFE}")
    if unsafe:
        print(f"warning: grading WITHOUT a sandbox. {UNSAFE}", file=sys.stderr)
    hide = [root, *submissions, *{s.parent for s in submissions}, *map(Path, hide)]
    if out is not None:
        hide.append(out.parent)
    rows = [dict(r, passed=int(r["passed"]), total=int(r["total"])) for r in kept]
    gradebook = Gradebook(out, kept)
    if not submissions:
        _print_grades(rows)
        return rows
    with tempfile.TemporaryDirectory(prefix="minattn-grading-") as tmp:
        tmp = Path(tmp)
        teacher = tmp / "teacher"
        copy_teacher(root, teacher)
        files = exercise_test_files(teacher, ids)
        env = {"MINATTN_FIGURES": str(tmp / "figures"), "PYTHONDONTWRITEBYTECODE": "1",
               "MPLBACKEND": "Agg"}
        if (root / "data").is_dir():
            env["MINATTN_DATA"] = str((root / "data").resolve())
        # once, before any submission: a sandbox that cannot start Python would fail them all
        visible = check_start(tmp, [str(h) for h in hide + [tmp]], worker_env(Path(INSIDE)),
                              unsafe)
        for course in visible:
            print(f"warning: the submissions can read a copy of the course at {course} (with "
                  "its solutions, if it is the teacher's): move it, or name it with --hide",
                  file=sys.stderr)
        specs, all_notes = [], []
        for i, sub in enumerate(submissions):
            work = tmp / f"submission-{i}"
            copy = work / "copy"
            copy.mkdir(parents=True)
            all_notes.append(build_graded_copy(sub, copy, ids, root))
            handed_out = (read_copy_manifest(sub) or {}).get("exercises")
            if handed_out is not None and (kept := [e for e in ids if e not in handed_out]):
                print(f"warning: {names[i]}: {' '.join(kept)} not handed out in this copy (its "
                      f"manifest lists {' '.join(handed_out) or 'none'}): its code there is the "
                      "teacher's solution unless the student wrote over it", file=sys.stderr)
            specs.append(dict(
                ids=ids, copy=str(copy), hide=[str(h) for h in hide + [tmp]], unsafe=unsafe,
                command=[python_executable(), "-s", "-c", WORKER],
                env=worker_env(copy if unsafe else Path(INSIDE)), timeout=timeout,
                call_timeout=min(CALL_TIMEOUT, timeout / 10),
                start_timeout=min(START_TIMEOUT, timeout / 4),
                report=str(work / "report.json"), status=str(work / "status.json"),
                pidfile=str(work / "worker.pid")))
        (tmp / "specs.json").write_text(json.dumps(specs))
        graded: set[int] = set()

        def record(collected: dict, finished_only: bool = True) -> None:
            """Each submission whose run has ended: its rows, into the gradebook now."""
            if "exercises" not in collected:
                return
            totals = {k: list(v.get("tests", [])) for k, v in collected["exercises"].items()}
            for i, (name, notes, spec) in enumerate(zip(names, all_notes, specs)):
                status = _read_json(spec["status"])
                if i in graded or finished_only and "rc" not in status:
                    continue
                status = status or {"rc": None, "timed_out": False}
                mine = _rows(name, ids, notes, totals, status["rc"], _read_json(spec["report"]),
                             status["timed_out"], timeout)
                with _signals_held():  # a Ctrl-C now waits: the rows are written once, whole
                    gradebook.add(mine)
                    rows.extend(mine)
                    graded.add(i)

        # One pytest: it collects the teacher's tests once (its report: the teacher's counts),
        # then runs them once per submission, each in a forked process with its own time limit.
        try:
            rc, output, collected, _ = run_pytest(
                teacher, ["--rootdir", str(teacher), "-p", "minattn.course.classroom.plugin",
                          "--remote-specs", str(tmp / "specs.json"), "-q", "--tb=line",
                          "--capture=no", *files, "--exercises", *ids],
                tmp / "collected.json", capture=True, timeout=COLLECTION + timeout * len(specs),
                env=env, poll=lambda: record(_read_json(tmp / "collected.json")))
        except (KeyboardInterrupt, SystemExit):  # Ctrl-C, SIGTERM: say what is left to grade
            record(_read_json(tmp / "collected.json"))
            left = [n for i, n in enumerate(names) if i not in graded]
            where = f" in {out}" if out is not None else ""
            print(f"\ngrading interrupted: {len(graded)} of {len(names)} submissions graded"
                  f"{where}; not graded: {', '.join(left)}"
                  + (" (grade them with the same command and --resume)" if out else ""),
                  file=sys.stderr)
            raise
        if not collected.get("read"):
            raise RuntimeError(f"the teacher's tests could not be collected (exit code {rc}):\n"
                               + output[-3000:])
        record(collected, finished_only=False)
    _print_grades(rows)
    if out is not None:
        print(f"gradebook: {out}")
    return rows


@contextlib.contextmanager
def _signals_held():
    """Ctrl-C, SIGTERM and SIGHUP wait until the block ends (then they act as usual)."""
    held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    before = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def worker_env(copy: Path) -> dict[str, str]:
    """The worker's whole environment (nothing of the teacher's)."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(copy),
            "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1", "MPLBACKEND": "Agg", "LANG": "C.UTF-8", "TMPDIR": str(copy)}


def _read_json(path) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}


WITHHELD = ("AssertionError", "Failed")  # a teacher's test comparing values: it names them


def feedback(counts: dict) -> str | None:
    """The first failure of an exercise as a gradebook may show it: which test, and what
    failed, never the values a teacher's assertion compared (they are its answer); what the
    submission's own code raised is said in full."""
    failures, kinds = counts.get("failures", {}), counts.get("kinds", {})
    if not failures:
        return counts.get("first_failure")
    nodeid, text = next(iter(failures.items()))
    kind = kinds.get(nodeid, "")
    if kind in WITHHELD:
        return (f"{nodeid.split('::', 1)[-1]}: {kind} (a check of its result failed; the values "
                "it compared are not shown)")
    return text


def _rows(name, ids, notes, totals, rc, report, timed_out, timeout) -> list[dict]:
    exercises = report.get("exercises", {})
    errors = report.get("errors", [])
    running = report.get("running")
    if timed_out:
        why = f"timed out after {timeout:g} s (in {running or 'its first test'})"
    elif rc not in (0, 1):
        why = f"the test run stopped (exit code {rc}) in {running or 'its first test'}"
    else:
        why = "did not run"
    rows = []
    for ex_id in ids:
        teacher_tests = totals.get(ex_id, [])
        counts = exercises.get(ex_id, {})
        total = len(teacher_tests)
        passed = min(counts.get("passed", 0), total)
        first = "; ".join(notes.get(ex_id, [])) or feedback(counts)
        if first is None and passed < total:
            skipped = [t for t in counts.get("skipped", []) if t in teacher_tests]
            if errors:
                first = f"error collecting {errors[0]['where']}: {errors[0]['message']}"
            elif skipped:
                first = (f"{len(skipped)} tests skipped on the grading machine (counted as not "
                         "passed)")
            else:
                first = why
        rows.append(dict(submission=name, exercise=ex_id, passed=passed, total=total,
                         first_failure=short(first or "", 300)))
    return rows


def _print_grades(rows: list[dict]) -> None:
    width = max([10] + [len(r["submission"]) for r in rows]) + 2
    print(f"\n{'submission':{width}}{'exercise':9}{'tests':8}first failure")
    for r in rows:
        tests = f"{r['passed']}/{r['total']}"
        print(f"{r['submission']:{width}}{r['exercise']:9}{tests:8}"
              f"{short(r['first_failure'], 80)}")
    print()
    for name in dict.fromkeys(r["submission"] for r in rows):
        mine = [r for r in rows if r["submission"] == name]
        done = sum(r["passed"] == r["total"] > 0 for r in mine)
        print(f"{name}: {done}/{len(mine)} exercises pass "
              f"({sum(r['passed'] for r in mine)}/{sum(r['total'] for r in mine)} tests)")
