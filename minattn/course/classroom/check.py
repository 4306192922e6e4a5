"""The check a student runs in a copy (`make exercises`): which exercises pass.

    python -m minattn.course.classroom check [ID...] [-v] [--timeout S]

It runs the copy's exercise tests (pytest with tests/conftest.py's `--exercises` and
`--exercise-report`) in a process group that a time limit, Ctrl-C or SIGTERM ends whole, and
prints one line per exercise, last. `run_pytest` is also how the grader runs the teacher's tests.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .. import REPO_ROOT
from .copies import HIDDEN_TESTS, read_copy_manifest
from .regions import all_exercises, by_id, expand_ids, summary


def run_pytest(root: Path, args: list[str], report: Path, capture: bool, timeout=None,
            env: dict | None = None, poll=None):
    """Run pytest on the copy at `root` in a fresh process group (its own minattn), at most
    `timeout` seconds. The group is killed on a timeout, and on Ctrl-C or any other exit of
    this process before it ends: nothing it started keeps running. `poll()`, if given, is
    called about twice a second while pytest runs (the grader records each finished
    submission). Returns (exit code, output, the exercise report -- with "read": True when
    pytest wrote one -- , timed out)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    full_env["PYTHONPATH"] = str(root) + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env.setdefault("OMP_NUM_THREADS", "1")
    full_env.update(env or {})
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=",
           "--continue-on-collection-errors", "--exercise-report", str(report), *args]
    proc = subprocess.Popen(cmd, cwd=root, env=full_env, start_new_session=True, text=True,
                            stdout=subprocess.PIPE if capture else None,
                            stderr=subprocess.STDOUT if capture else None)
    timed_out = False
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                out, _ = proc.communicate(timeout=left if poll is None else min(left or 0.5, 0.5))
                break
            except subprocess.TimeoutExpired:
                if deadline is not None and time.monotonic() >= deadline:
                    raise
                poll()
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
        out, _ = proc.communicate()
    except BaseException:  # Ctrl-C, SIGTERM (see exit_on_signals): end the whole group
        _kill_group(proc)
        proc.wait()
        raise
    try:
        results = dict(json.loads(report.read_text()), read=True)
    except (OSError, ValueError, TypeError):
        results = {"exercises": {}, "errors": [], "running": None}
    return proc.returncode, out or "", results, timed_out


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def exit_on_signals() -> None:
    """SIGTERM and SIGHUP end this process the way Ctrl-C does (so children are cleaned up)."""
    def stop(signum, frame):
        raise SystemExit(128 + signum)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)


def short(text: str, width: int = 110) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[:width - 1] + "…"


def n_run(counts: dict) -> int:
    """How many of an exercise's tests count: those collected, less those skipped."""
    collected = len(counts.get("tests", [])) or counts.get("passed", 0) + counts.get("failed", 0)
    return collected - len(counts.get("skipped", []))


def state_of(counts: dict, ex_id: str) -> tuple[str, str]:
    """(PASS | FAIL | not implemented yet | skipped | no tests, the message that blocks it)."""
    total = n_run(counts)
    if total == 0:
        if counts.get("skipped"):
            return "skipped", f"{len(counts['skipped'])} tests skipped (CUDA or data missing)"
        return "no tests", "no test is marked @pytest.mark.exercise"
    if counts.get("passed", 0) == total:
        return "PASS", ""
    messages = counts.get("messages", [])
    if counts.get("failed", 0) and counts["failed"] == counts.get("not_implemented", 0):
        first = messages[0] if messages else ""
        m = re.match(r"Exercise (\S+): (.*)", first)
        if m and m[1] != ex_id:
            return "not implemented yet", f"waits on exercise {m[1]} ({m[2]})"
        return "not implemented yet", m[2] if m else first
    return "FAIL", counts.get("first_failure") or "did not run"


def collection_state(errors: list[dict], ex_id: str) -> tuple[str, str]:
    """(state, message) of an exercise none of whose tests could be collected: a stub reached
    while a test file imports means "not implemented yet" (waiting on that exercise); any
    other error (a syntax error in the student's code, say) fails it, naming where."""
    for error in errors:
        if m := re.match(r"NotImplementedError: Exercise (\S+): (.*?)(?: \(\S+:\d+\))?$",
                         error["message"]):
            return "not implemented yet", (m[2] if m[1] == ex_id
                                           else f"waits on exercise {m[1]} ({m[2]})")
    return "FAIL", f"error collecting {errors[0]['where']}: {errors[0]['message']}"


# ============================================================================ answers' forms
def answer_form_problem(ex_id: str, where: str, form: str, value, choices=None) -> str | None:
    """What is wrong with the form of a predict or experiment answer, said to the student: the
    exercise, the function, what the question asks for and what it got (None when the form is
    right). The visible test of every answer and the grader (plugin.py) both say it."""
    import math

    def wrong(expected):
        return f"exercise {ex_id}: {where}() returned {value!r}; it should return {expected}"
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if form == "float" and not (number and math.isfinite(value)):
        return wrong("a number (a float, e.g. 0.25)")
    if form == "int" and not (isinstance(value, int) and not isinstance(value, bool)):
        return wrong("a whole number (an int, e.g. 3)")
    if form == "str" and not (isinstance(value, str) and value and (
            choices is None or value in choices)):
        return wrong("one of " + ", ".join(map(repr, choices)) if choices
                     else "a word or a phrase (a non-empty str)")
    if form.startswith("set") and not (isinstance(value, set) and all(
            isinstance(v, str) for v in value)):
        return wrong("a set of names (a set of str, e.g. {'a', 'b'})")
    if value is None:
        return wrong("your answer")
    return None


def answer_problem(ex_id: str, fn, value) -> str | None:
    """answer_form_problem for the value an answer function returned: the form is its return
    annotation, the choices its module's CHOICES (where the module lists them)."""
    import importlib
    import inspect

    form = inspect.signature(fn).return_annotation
    form = form if isinstance(form, str) else getattr(form, "__name__", str(form))
    choices = getattr(importlib.import_module(fn.__module__), "CHOICES", None)
    return answer_form_problem(ex_id, fn.__name__, form, value, choices)


def check(ids=None, verbose: bool = False, root: Path = REPO_ROOT,
          timeout: float | None = 900, report: Path | None = None) -> int:
    """Run the exercise tests of this copy (at most `timeout` seconds) and print one line per
    exercise, last. `report`: where pytest's exercise report is kept (default: thrown away)."""
    groups = by_id(all_exercises(root))
    handed_out = (read_copy_manifest(root) or {}).get("exercises")  # a student copy's exercises
    wanted = expand_ids(ids, groups) if ids else [i for i in groups if i in (handed_out or groups)]
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(report or Path(tmp) / "report.json")
        args = ["tests"] + (["-v", "--tb=short"] if verbose else ["-q", "--tb=no", "--no-header"])
        args += ["--exercises", *wanted]  # last: it takes every argument after it
        rc, out, results, timed_out = run_pytest(Path(root), args, report, capture=not verbose,
                                                 timeout=timeout)
    exercises = results.get("exercises", {})
    if not exercises and rc not in (0, 1) and not timed_out:
        print(out[-4000:])
        print(f"pytest could not run the exercise tests (exit code {rc}); see above.")
        return rc or 2
    # A test file that does not import is no crash in a copy where a stub runs at import
    # time: its exercises' rows say what they wait on; any other error goes in their rows.
    errors = results.get("errors", [])
    stopped = (f"timed out after {timeout:g} s in {results.get('running') or 'collection'}"
               if timed_out else None)
    if stopped:
        print(f"the check {stopped}: the tests after it did not run "
              "(make exercises TIMEOUT=<seconds> allows more)")
    print(f"\n{'exercise':9}{'kind':11}{'state':21}{'tests':7}message")
    failing = []
    for ex_id in wanted:
        kind = summary(groups[ex_id]).kind
        counts = exercises.get(ex_id, {})
        state, message = state_of(counts, ex_id)
        if state == "no tests" and errors:
            state, message = collection_state(errors, ex_id)
        done = counts.get("passed", 0) + counts.get("failed", 0) + len(counts.get("skipped", []))
        if stopped and done < len(counts.get("tests", [])):
            state, message = "FAIL", f"did not finish: {stopped}"
        if state == "PASS" and kind != "implement" and not any(
                t.startswith(HIDDEN_TESTS + "/") for t in counts.get("tests", [])):
            state, message = "answered", "well formed; the teacher's tests check the value"
        if state not in ("PASS", "answered", "skipped"):
            failing.append(ex_id)
        total = n_run(counts)
        tests = f"{counts.get('passed', 0)}/{total:<5}"
        print(f"{ex_id:9}{kind:11}{state:21}{tests}{short(message, 200)}")
    if failing and not verbose:
        print(f"\ndetails (tracebacks): make exercises EX={failing[0]} TB=1")
    return 1 if failing else 0
