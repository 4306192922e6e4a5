"""A pytest plugin (`-p swap_mistake`, this folder on PYTHONPATH): the visible tests of an
exercise run once per typical mistake of a student, each in a process forked after collection
with that mistake swapped into the library (see README.md here). MINATTN_MISTAKES lists the
mistake files (os.pathsep between them); each run writes its exercise report to
MINATTN_MISTAKE_REPORTS/<the file's stem>.json.

Each function a mistake file defines takes the place of the library function of the same name
that holds a region of its EXERCISE: the code object is swapped, so the wrong body runs with the
library module's names, wherever the function is called from."""

import contextlib
import importlib.util
import os
import sys
from pathlib import Path

from minattn.course import REPO_ROOT
from minattn.course.classroom.stubs import holders, resolve


def swap_in(path: str) -> str:
    """Swap the mistake in; its exercise's id."""
    spec = importlib.util.spec_from_file_location("typical_mistake", path)
    mistake = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mistake)
    swapped = []
    for module, qualname in holders({mistake.EXERCISE}, REPO_ROOT):
        wrong = getattr(mistake, qualname.rsplit(".", 1)[-1], None)
        if wrong is None:
            continue
        fn = resolve(module, qualname)
        while hasattr(fn, "__wrapped__"):  # @checked: the function it checks the inputs of
            fn = fn.__wrapped__
        fn.__code__ = wrong.__code__
        swapped.append(qualname)
    if not swapped:
        raise RuntimeError(f"{path} defines no function of exercise {mistake.EXERCISE}")
    return mistake.EXERCISE


def of_exercise(item, ex_id: str) -> bool:
    marker = item.get_closest_marker("exercise")
    return marker is not None and str(marker.args[0]) == ex_id


def pytest_runtestloop(session):
    """Collected once; then, per mistake, a forked process swaps it in and runs the tests."""
    from _pytest.main import pytest_runtestloop as run_tests

    reports = Path(os.environ["MINATTN_MISTAKE_REPORTS"])
    for path in os.environ["MINATTN_MISTAKES"].split(os.pathsep):
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 3
            try:
                session.config.option.exercise_report = str(reports / f"{Path(path).stem}.json")
                ex_id = swap_in(path)  # the visible tests of its exercise run, no other
                session.items[:] = [item for item in session.items if of_exercise(item, ex_id)]
                session.testscollected = len(session.items)
                run_tests(session)
                code = 0
            except BaseException:  # noqa: BLE001 -- no report: the meta-test says so
                import traceback

                traceback.print_exc()
            finally:
                with contextlib.suppress(BaseException):
                    sys.stdout.flush()
                    sys.stderr.flush()
                os._exit(code)
        os.waitpid(pid, 0)
    return True
