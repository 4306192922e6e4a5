"""Shared fixtures and the exercise report.

`pytest --exercises` runs only the tests marked @pytest.mark.exercise("<id>") and ends with a
table: for each exercise, how many of its tests pass and, if not, whether it is still
"not implemented yet". `--exercise-report PATH` also writes that table as JSON.
"""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pytest
import torch


def pytest_addoption(parser):
    parser.addoption("--exercises", nargs="*", default=None, metavar="ID",
                     help="run only exercise tests (all, or the ids given) and report which pass")
    parser.addoption("--exercise-report", default=None, help="write the exercise table as JSON")


def pytest_collection_modifyitems(config, items):
    wanted = config.getoption("--exercises")
    if wanted is not None:
        items[:] = [item for item in items if (m := item.get_closest_marker("exercise"))
                    and (not wanted or str(m.args[0]) in wanted)]
    if not torch.cuda.is_available():
        skip = pytest.mark.skip(reason="needs a CUDA device")
        for item in items:
            if item.get_closest_marker("cuda"):
                item.add_marker(skip)


_RESULTS: dict[str, dict] = defaultdict(lambda: {"passed": 0, "failed": 0, "not_implemented": 0,
                                                 "messages": []})


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    marker = item.get_closest_marker("exercise")
    if marker is None or report.when != "call" and not (report.when == "setup" and report.failed):
        return
    counts = _RESULTS[str(marker.args[0])]
    if report.passed:
        counts["passed"] += 1
    elif report.failed:
        counts["failed"] += 1
        if call.excinfo is not None and call.excinfo.errisinstance(NotImplementedError):
            counts["not_implemented"] += 1
            message = str(call.excinfo.value)
            if message not in counts["messages"]:
                counts["messages"].append(message)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _RESULTS or (config.getoption("--exercises") is None
                        and not config.getoption("--exercise-report")):
        return
    write = terminalreporter.write_line
    terminalreporter.section("exercises")
    for ex_id in sorted(_RESULTS, key=lambda s: [int(p) if p.isdigit() else p for p in s.split(".")]):
        c = _RESULTS[ex_id]
        total = c["passed"] + c["failed"]
        if c["failed"] == 0:
            state = "PASS"
        elif c["not_implemented"] == c["failed"]:
            state = "not implemented yet"
        else:
            state = "FAIL"
        write(f"exercise {ex_id:6} {state:20} {c['passed']}/{total} tests pass")
        for message in c["messages"]:  # which exercise is in the way (may be an earlier one)
            write(f"    raised: {message}")
    path = config.getoption("--exercise-report")
    if path:
        with open(path, "w") as f:
            json.dump(dict(_RESULTS), f, indent=2)


@pytest.fixture
def rng():
    """A fresh seeded NumPy generator per test: the same numbers every run."""
    return np.random.default_rng(0)
