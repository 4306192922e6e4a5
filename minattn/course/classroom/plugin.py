"""Grading in two processes: the teacher's tests in one, the student's functions in another.

The grader (grading.py) runs pytest on a copy of the *teacher's* repository with this
module as a plugin (`-p minattn.course.classroom.plugin --remote-specs specs.json`). pytest
collects the tests once; then, for each submission, a forked process replaces the code of every
function that holds a region of a graded exercise (the function and its twins: the same set that
`stubs.stub_in_process` stubs) by a trampoline and runs the tests: a call
sends the arguments to a *worker* process that imports the submission's `minattn/` and runs
the student's version there (worker.py), in the sandbox of sandbox.py; the values it returns come
back and the teacher's test goes on with them. Gradients flow back through the same channel:
a torch output that needs them is the output of an autograd Function whose backward asks the
worker for the vector-Jacobian product.

Threat model. The student controls every byte their functions compute, and can run any code
in the worker: patch numpy.testing or pytest, register atexit hooks, skip, exit, hang, fork,
print, write files, read its own copy, or talk the wire protocol itself. None of it reaches a
verdict, because:
- the verdict is pytest's outcome in the teacher's process, which never imports or runs the
  submission's code; it writes the report to a folder the worker cannot see (the grader then
  reads that report, never anything the worker wrote);
- what comes back from the worker is decoded by a small parser (protocol.py, no pickle): None,
  bools, numbers, strings, tuples/lists/dicts/sets of them, NumPy arrays and scalars of numeric
  dtypes, torch tensors of numeric dtypes; anything else, a malformed or oversized message,
  a wrong reply id, fails the test that made the call;
- an exception in the worker comes back as its type name and message: a few built-in types
  (ValueError, TypeError, NotImplementedError, ...) are raised again as themselves, so that
  the teacher's `pytest.raises` still works, and everything else, pytest's skip and exit
  included, as SubmissionError: a failure, never a skip;
- a worker that dies or breaks the protocol fails the calling test and is restarted for the
  next (at most client.MAX_RESTARTS starts per exercise; that exercise's later calls fail); a
  call that runs past its time limit (the spec's call_timeout) ends the worker and fails its
  exercise's later calls, and the grader's time limit ends the whole process group.
What the student *can* do is what a student's function can always do: return any value for
any input (so the teacher's tests, not this channel, decide what is right) and read its own
copy (which holds only the library, no tests, and no teacher solution of a graded exercise).
Arguments go from the teacher to the worker pickled (the worker is the side that unpickles),
tensors beside them as raw bytes.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path

from .client import Worker
from .stubs import holders, resolve, stub_in_process


def _trampoline(fn, module: str, qualname: str):
    """A code object for `fn` that sends every call to the worker."""
    free = fn.__code__.co_freevars
    body = [f"def {fn.__name__}(*args, **kwargs):"]
    if free:
        body.append("    (" + ", ".join(free) + ",)")
    body.append(f"    return __minattn_remote_call__({module!r}, {qualname!r}, args, kwargs)")
    source = "\n".join(body)
    if free:
        source = ("def _outer():\n" + "".join(f"    {v} = None\n" for v in free)
                  + "\n".join("    " + line for line in body) + f"\n    return {fn.__name__}\n")
    code = compile(source, fn.__code__.co_filename, "exec")
    inner = next(c for c in code.co_consts if hasattr(c, "co_code"))
    if free:
        inner = next(c for c in inner.co_consts if hasattr(c, "co_code"))
    if inner.co_freevars != free:
        raise ValueError(f"cannot stand in for {module}.{qualname} (closure {free})")
    return inner.replace(co_name=fn.__code__.co_name, co_qualname=fn.__code__.co_qualname,
                         co_firstlineno=fn.__code__.co_firstlineno)


# ============================================================================ the plugin
_WORKER: Worker | None = None
_SWAPPED: list = []
_ANSWERS: dict[str, list] = {}  # predict/experiment id -> its answer functions (routed)
_FORMS: dict[str, str | None] = {}  # id -> what is wrong with the form of its answer


class AnswerFormError(TypeError):
    """A predict or experiment answer of the wrong form (a str for a float, say): the test
    fails with what the question asks for, as the student's check says it, instead of the
    error the teacher's comparison would raise."""


def install(spec: dict, root: Path) -> list[tuple[str, str]]:
    """Route every call of the graded exercises' functions (in this process) to a worker."""
    global _WORKER
    _WORKER = Worker(spec)

    def remote_call(module, qualname, args, kwargs):
        return _WORKER.call(module, qualname, args, kwargs)

    nested: list[str] = []
    routed = holders(set(spec["ids"]), root, nested)
    for ex_id in nested:  # closures cannot travel: their regions are stubs here, never the key
        stub_in_process(ex_id, root)
    for module, qualname in routed:
        fn = resolve(module, qualname)
        fn.__globals__["__minattn_remote_call__"] = remote_call
        _SWAPPED.append((fn, fn.__code__))
        fn.__code__ = _trampoline(fn, module, qualname)
    from .regions import all_exercises, by_id

    for ex_id, regions in by_id(all_exercises(root)).items():
        if ex_id in spec["ids"] and regions[0].kind != "implement":
            _ANSWERS[ex_id] = [resolve(m, q) for m, q in routed
                               if (m, q) in holders({ex_id}, root)]
    return routed


def answer_form(ex_id: str) -> str | None:
    """What is wrong with the form of exercise ex_id's answer (check.answer_problem), asked of
    the worker once per submission; None when it is right, or raises (the test says that)."""
    from .check import answer_problem

    if ex_id not in _FORMS:
        _FORMS[ex_id] = None
        for fn in _ANSWERS.get(ex_id, []):
            try:
                value = fn()
            except Exception:  # noqa: BLE001 -- a stub or a crash: the test itself reports it
                continue
            if problem := answer_problem(ex_id, fn, value):
                _FORMS[ex_id] = problem
                break
    return _FORMS[ex_id]


def pytest_addoption(parser):
    parser.addoption("--remote-specs", default=None,
                     help="(grading) JSON file: one worker spec per submission; the tests run "
                          "once per submission, each run in a process forked after collection")


def pytest_runtestloop(session):  # a -p plugin: called before pytest's own loop
    """Collect once (the teacher's code only: the count of tests is the teacher's), then for
    each submission fork a process that routes the graded functions to that submission's
    worker and runs the tests, writing its own report; at most `timeout` seconds each, after
    which it and its worker are killed. The forked runs share what collection imported (torch
    is imported once per grading, not once per submission)."""
    path = session.config.getoption("--remote-specs")
    if not path:
        return None
    import minattn

    root = Path(minattn.__file__).resolve().parents[1]
    for entry in json.loads(Path(path).read_text()):
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _run_forked(session, entry, root)
        status = _wait(pid, entry)
        Path(entry["status"]).write_text(json.dumps(status))
    return True


def _run_forked(session, entry: dict, root: Path) -> None:
    """In the forked process: this submission's run, then exit (never back into pytest)."""
    from _pytest.main import pytest_runtestloop as run_tests

    code = 3
    try:
        session.config.option.exercise_report = entry["report"]
        install(entry, root)
        run_tests(session)
        code = 1 if session.testsfailed else 0
    except BaseException:  # noqa: BLE001 -- the grader reads the exit code
        traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            if _WORKER is not None:
                _WORKER.close()
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _wait(pid: int, entry: dict) -> dict:
    deadline = time.monotonic() + float(entry["timeout"])
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return {"rc": os.waitstatus_to_exitcode(status), "timed_out": False}
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    for victim in [pid] + [int(p) for p in [_read(entry.get("pidfile"))] if p.isdigit()]:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(victim, signal.SIGKILL)
    os.waitpid(pid, 0)
    return {"rc": -9, "timed_out": True}


def _read(path) -> str:
    try:
        return Path(path).read_text().strip() if path else ""
    except OSError:
        return ""


def pytest_runtest_setup(item):
    if _WORKER is not None:  # the crash budget is the exercise's (client.MAX_RESTARTS)
        marker = item.get_closest_marker("exercise")
        _WORKER.exercise = str(marker.args[0]) if marker and marker.args else ""
        if problem := answer_form(_WORKER.exercise):
            raise AnswerFormError(problem)


def pytest_runtest_teardown(item, nextitem):
    if _WORKER is not None:
        _WORKER.forget()  # the autograd graphs of this test


def pytest_unconfigure(config):
    if _WORKER is not None:
        _WORKER.close()
