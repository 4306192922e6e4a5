"""A pytest plugin (`-p swap_mistake`, this folder on PYTHONPATH): the library with one typical
mistake of a student swapped in, from the file MINATTN_MISTAKE names (see README.md here).

Each function that file defines takes the place of the library function of the same name that
holds a region of its EXERCISE: the code object is swapped, so the wrong body runs with the
library module's names, wherever the function is called from (a student's copy, as the
student's check runs it)."""

import importlib.util
import os

from minattn.course import REPO_ROOT
from minattn.course.classroom.stubs import holders, resolve


def load(path):
    spec = importlib.util.spec_from_file_location("typical_mistake", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pytest_configure(config):
    mistake = load(os.environ["MINATTN_MISTAKE"])
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
        raise RuntimeError(f"{os.environ['MINATTN_MISTAKE']} defines no function of exercise "
                           f"{mistake.EXERCISE}")
