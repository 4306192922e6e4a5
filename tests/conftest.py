"""Shared fixtures and the exercise report.

`pytest --exercises [ID...]` runs only the tests marked @pytest.mark.exercise("<id>") and ends
with a table: for each exercise, how many of its tests pass and, if not, whether it is still
"not implemented yet". `--exercise-report PATH` also writes the results as JSON, after every test
(a run killed half-way still leaves what it did); `python -m minattn.course.classroom check` and
`grade` read it. `--stub-each` runs every exercise test with its own exercise stubbed out in
place, as in a student copy (tests/test_exercises.py uses it). Tests in tests/hidden/ are
teacher-only: student copies do not have them.
"""

from __future__ import annotations

import gc
import json
import os
import re
import sys
from pathlib import Path

# Under pytest-xdist (`make test`: -n 2) each worker takes its share of the cores for torch's
# threads and NumPy's BLAS, and so do the processes it starts. Two workers that each wake one
# thread per core keep the cores spinning in waits: on the course's 2-core machine the suite
# took 3 min 1 s of wall time and 4 min 53 s of CPU that way, 2 min 30 s and 3 min 56 s with one
# torch thread each. OpenBLAS reads OMP_NUM_THREADS once, when NumPy is first imported, hence
# before the imports below: a BLAS-bound answer took 2.5 s of CPU beside a busy core with two
# BLAS threads, 0.8 s with one.
if _workers := os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    _cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (_cores or 1) // int(_workers))))
    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

import numpy as np
import pytest

import minattn

# Bytecode caching as on a learner's machine: where the environment turns it off
# (PYTHONDONTWRITEBYTECODE=1, common in containers), every process the suite starts (lesson
# runs, student copies' checks, sandboxed graders) would compile the library again.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

# conftest.py at the root puts this checkout first on sys.path; refuse anything else.
_HERE = Path(__file__).resolve().parents[1]
if Path(minattn.__file__).resolve().parents[1] != _HERE:
    raise pytest.UsageError(f"these tests belong to {_HERE}, but `import minattn` found "
                            f"{Path(minattn.__file__).resolve().parent} (another copy)")


@pytest.fixture(scope="session")
def answer():
    """`answer(fn)`: the value of a predict or experiment answer function, computed once per
    test run (the visible form check and a hidden value check share it: an experiment may take
    seconds). Keyed by the function and its code, so a stubbed or replaced body runs afresh;
    an exception is not kept."""
    values = {}

    def value(fn):
        key = (fn, fn.__code__)
        if key not in values:
            values[key] = fn()
        return values[key]
    return value


def pytest_addoption(parser):
    parser.addoption("--exercises", nargs="*", default=None, metavar="ID",
                     help="run only exercise tests (all, or the ids given) and report which pass")
    parser.addoption("--exercise-report", default=None, help="write the exercise results as JSON")
    parser.addoption("--stub-each", action="store_true",
                     help="run each exercise test with its own exercise stubbed out in place")
    parser.addoption("--trace-regions", action="store_true",
                     help="record which regions of its exercise each exercise test enters; "
                          "a test whose exercise's regions were all entered already is skipped")


def _exercise_of(item) -> str | None:
    marker = item.get_closest_marker("exercise")
    return str(marker.args[0]) if marker else None


# The tests of the course's machinery rather than of a mechanism: lessons run as scripts and
# notebooks, pages in a browser, student copies, grading, data fetching. `make check` (the
# contributors' minute) leaves them to `make test`.
COURSE_TESTS = ("test_lessons.py", "test_exercises.py", "test_course_pages.py", "test_fetch.py",
                "test_data_integrity.py", "test_benchmarks.py", "test_hidden_classroom.py",
                "test_lesson_tools.py", "test_gpu_tier.py")


# The files that take longest (over ~3 s on 2 cores), longest first. Under pytest-xdist (`make
# test`: `--dist loadfile --no-loadscope-reorder`) a worker takes one file at a time in this
# order, then the short ones, so that no long file starts when the other worker is nearly done.
SLOW_FILES = ("test_lessons.py", "test_exercises.py", "test_stats.py", "test_course_pages.py",
              "test_hidden_classroom.py", "test_xl.py", "test_hidden_mistakes.py",
              "test_runner_signals.py", "test_gpu_dispatch.py", "test_lesson_claims.py",
              "test_layout.py", "test_task_heads.py", "test_recorded_claims.py",
              "test_checked.py", "test_lesson_tools.py")


def pytest_collection_modifyitems(config, items):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        rank = {name: i for i, name in enumerate(SLOW_FILES)}
        items.sort(key=lambda item: rank.get(Path(str(item.fspath)).name, len(rank)))
    for item in items:
        if "hidden" in Path(str(item.fspath)).parts:
            item.add_marker(pytest.mark.hidden)
        if Path(str(item.fspath)).name in COURSE_TESTS:
            item.add_marker(pytest.mark.course)
    wanted = config.getoption("--exercises")
    if wanted is not None:
        if wanted:
            from minattn.course.classroom.regions import all_exercises, expand_ids

            try:
                wanted = expand_ids(wanted, {e.id for e in all_exercises()} | {
                    _exercise_of(i) for i in items if _exercise_of(i)})
            except ValueError as err:
                raise pytest.UsageError(str(err)) from None
        items[:] = [item for item in items if (ex := _exercise_of(item))
                    and (not wanted or ex in wanted)]
    if any(item.get_closest_marker("cuda") for item in items) and not _has_cuda():
        skip = pytest.mark.skip(reason="needs a CUDA device")
        for item in items:
            if item.get_closest_marker("cuda"):
                item.add_marker(skip)
    for item in items:
        if ex := _exercise_of(item):
            _entry(ex)["tests"].append(item.nodeid)
    _write(config)


def _has_cuda() -> bool:
    import torch  # only when a test asks for CUDA: the exercise check starts faster

    return torch.cuda.is_available()


_RESULTS: dict = {"exercises": {}, "errors": [], "running": None}


def _entry(ex_id: str) -> dict:
    return _RESULTS["exercises"].setdefault(ex_id, {
        "tests": [], "skipped": [], "passed": 0, "failed": 0, "not_implemented": 0,
        "own_not_implemented": 0, "raised_at": [], "entered": [],
        "messages": [], "first_failure": None, "failures": {}})


def _write(config) -> None:
    path = config.getoption("--exercise-report")
    if path:
        tmp = Path(path).with_suffix(".tmp")
        tmp.write_text(json.dumps(_RESULTS))  # no indent: C's encoder, after every test
        tmp.replace(path)


def pytest_collectreport(report):
    if report.failed:
        crash = getattr(report.longrepr, "reprcrash", None)
        text = str(report.longrepr)
        lines = text.strip().splitlines() or ["?"]
        message = (crash.message if crash else lines[-1]).removeprefix("E").strip()
        if files := re.findall(r'File "([^"]+)", line (\d+)', text):  # where the import broke
            path, line = files[-1]
            root = str(_HERE) + "/"
            message += f" ({path.removeprefix(root)}:{line})"
        _RESULTS["errors"].append({"where": report.nodeid, "message": message})


_RESTORE = {}


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    _RESULTS["running"] = item.nodeid  # what a killed run was doing
    _write(item.config)
    if item.config.getoption("--stub-each") and (ex := _exercise_of(item)):
        from minattn.course.classroom.stubs import stub_in_process

        _RESTORE[item.nodeid] = stub_in_process(ex)
    elif item.config.getoption("--trace-regions") and (ex := _exercise_of(item)):
        from minattn.course.classroom.regions import all_exercises
        from minattn.course.classroom.stubs import trace_in_process

        entered = _entry(ex)["entered"]
        if all(f"{e.path}:{e.line}" in entered for e in all_exercises() if e.id == ex):
            pytest.skip(f"every region of exercise {ex} was entered already")
        _RESTORE[item.nodeid] = trace_in_process(
            ex, lambda where: entered.append(where) if where not in entered else None)


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_teardown(item, nextitem):
    yield
    if (restore := _RESTORE.pop(item.nodeid, None)) is not None:
        restore()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    ex_id = _exercise_of(item)
    failed_setup = report.when == "setup" and not report.passed
    if ex_id is None or report.when != "call" and not failed_setup:
        return
    counts = _entry(ex_id)
    if report.skipped:  # no CUDA, no fetched data: neither passed nor failed
        counts["skipped"].append(item.nodeid)
    elif report.passed:
        counts["passed"] += 1
    elif report.failed:
        counts["failed"] += 1
        name = item.nodeid.split("::", 1)[-1]
        excinfo = call.excinfo
        if excinfo is not None and excinfo.errisinstance(NotImplementedError):
            counts["not_implemented"] += 1
            message = str(excinfo.value)
            counts["own_not_implemented"] += message.startswith(f"Exercise {ex_id}:")
            if message not in counts["messages"]:
                counts["messages"].append(message)
            if (where := _raised_at(excinfo.tb)) not in counts["raised_at"]:
                counts["raised_at"].append(where)  # a stub raises from the line after BEGIN
        crash = getattr(report.longrepr, "reprcrash", None)
        if excinfo is not None and excinfo.typename == "Failed":  # pytest.fail("why"): the why
            text = str(excinfo.value)
        elif excinfo is not None and not excinfo.errisinstance(AssertionError):
            text = f"{excinfo.typename}: {excinfo.value}"
        else:  # pytest's rewritten assert says most
            text = crash.message if crash else str(report.longrepr)
        failure = f"{name}: {failure_summary(text)}"
        counts["failures"][item.nodeid] = failure
        # what failed, without its values: the grader's feedback (the values a teacher's test
        # compares with are its answer)
        counts.setdefault("kinds", {})[item.nodeid] = (
            excinfo.typename if excinfo is not None else "failed")
        counts["first_failure"] = counts["first_failure"] or failure
    _write(item.config)


_WHERE = re.compile(r"^\+\s+where (?P<value>.+?) = (?P<expr>.+)$")
_OBJECT = re.compile(r"<(?:built-in )?(?:function|method|bound method) ([\w.]+)"
                     r"(?: at 0x\w+| of .*?)?>")
# numpy.testing's lines that name the values it compared
_NUMPY = re.compile(r"^(Mismatched elements|Max absolute difference[^:]*|ACTUAL|DESIRED|x|y):")


def failure_summary(text: str) -> str:
    """A failed check in one line that names the values it compared: pytest's `assert
    np.False_` becomes `assert allclose(array([...]), array([...]))` (its first "where" line);
    numpy.testing's message keeps its mismatch count, largest difference and both arrays."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    if not lines:
        return "failed"
    if len(lines) > 1 and lines[0].endswith(":"):  # "AssertionError:" then the reason
        lines[0] += " " + lines.pop(1)
    first = lines[0]
    if first.startswith("assert ") and len(lines) > 1 and (m := _WHERE.match(lines[1])):
        value = m["value"]
        if value in first:  # `assert X` where X = f(a, b): say `assert f(a, b)`
            first = first.replace(value, _OBJECT.sub(r"\1", m["expr"]), 1)
    named = [line for line in lines[1:] if _NUMPY.match(line)]
    return "; ".join([first, *named]) if named else first


def _raised_at(tb) -> str:
    """'path:line' (relative to the checkout where it lies there) of a traceback's last frame."""
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return "?"
    path = tb.tb_frame.f_code.co_filename
    return f"{path.removeprefix(str(_HERE) + '/')}:{tb.tb_lineno}"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    _RESULTS["running"] = None
    _write(config)
    if not _RESULTS["exercises"] or config.getoption("--exercises") is None:
        return
    from minattn.course.classroom.check import state_of
    from minattn.course.classroom.regions import id_key

    terminalreporter.section("exercises")
    for ex_id in sorted(_RESULTS["exercises"], key=id_key):
        counts = _RESULTS["exercises"][ex_id]
        state, message = state_of(counts, ex_id)
        line = f"exercise {ex_id:6} {state:20} {counts['passed']}/{len(counts['tests'])} tests pass"
        terminalreporter.write_line(line + (f"  {message}" if message else ""))


@pytest.fixture
def rng():
    """A fresh seeded NumPy generator per test: the same numbers every run."""
    return np.random.default_rng(0)


def pytest_collection_finish(session):
    """Start the lesson smoke runs the collected tests will ask for (tests/test_lessons.py) in
    the background, so that they run beside the other tests instead of after them (not for
    `--collect-only`: nothing runs).

    First, what the imports and the collection built (torch's, matplotlib's and the tests'
    objects, kept as long as the process runs) is moved out of the garbage collector's sight,
    and its full pass comes after 100 partial ones, not 10: the full passes walked all of it
    again, 17 of them in a worker's share of the suite, 4-5 s of CPU (8 passes, 1-2 s now)."""
    if session.config.option.collectonly:
        return
    gc.freeze()
    gc.set_threshold(gc.get_threshold()[0], 10, 100)
    by_module = {}
    for item in session.items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        module = getattr(item, "module", None)
        if module is not None and module.__name__.endswith("test_lessons") and "lesson" in params:
            by_module.setdefault(module, []).append(params["lesson"])
    worker = getattr(session.config, "workerinput", None)  # a pytest-xdist worker
    for module, lessons in by_module.items():
        if worker is not None:  # the workers share the runs: the first to need one runs it
            shared = session.config._tmp_path_factory.getbasetemp().parent / "smoke-runs"
            module.SMOKE_RUNS.share(shared / worker["testrunuid"])
            continue
        order = sorted(set(lessons), key=lambda p: p.name)
        module.SMOKE_RUNS.start(order)
    session.config.stash[_SMOKE_MODULES] = list(by_module)


_SMOKE_MODULES = pytest.StashKey[list]()


def pytest_sessionfinish(session):
    for module in session.config.stash.get(_SMOKE_MODULES, []):
        module.SMOKE_RUNS.stop()
