"""The course's settings: every MINATTN_* environment variable, read and checked in one place.

`settings()` is called by the runner (`make course`, `make smoke`) before it writes anything, and
by `Lesson()` when a lesson starts, so that a bad value is refused once, in one line that names
the variable and what it may be, instead of failing inside every lesson:

    MINATTN_SMOKE=1        shrink data and steps so a lesson runs in seconds (a boolean)
    MINATTN_SCALE=paper    full (the default), paper (the authors' budget) or smoke
    MINATTN_DEVICE=cpu     cpu, cuda or cuda:N (default: cuda when available, else cpu)
    MINATTN_SEED=100       an integer added to every seed a lesson uses (default 0)
    MINATTN_FIGURES=DIR    where figures and claims go (a folder)
    MINATTN_DATA=DIR       where the datasets are (a folder)
    MINATTN_RUNNER=1       set by the runner for the lessons it executes (a boolean)
    MINATTN_COMPILE_TESTS=1  the tests that compile FlexAttention on the CPU (a boolean)
    MINATTN_MISTAKES, MINATTN_MISTAKE_REPORTS  set by the teacher's test of typical mistakes
                           (tests/hidden/test_hidden_mistakes.py) for the pytest it starts

A boolean is one of 0/1, true/false, yes/no, on/off (any case; unset or empty is off).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
SCALES = ("full", "paper", "smoke")
DEVICE = re.compile(r"cpu|cuda(:\d+)?")
NAMES = ("MINATTN_SMOKE", "MINATTN_SCALE", "MINATTN_DEVICE", "MINATTN_SEED", "MINATTN_FIGURES",
         "MINATTN_DATA", "MINATTN_RUNNER", "MINATTN_COMPILE_TESTS", "MINATTN_MISTAKES",
         "MINATTN_MISTAKE_REPORTS")


class SettingsError(ValueError):
    """A MINATTN_* value the course refuses; its message is the one line to show."""


@dataclass(frozen=True)
class Settings:
    smoke: bool  # smoke mode, from MINATTN_SMOKE or MINATTN_SCALE=smoke
    scale: str  # "smoke", "full" or "paper"
    device: str | None  # None: cuda when available, else cpu
    seed: int  # added to every seed a lesson uses
    figures: Path | None  # None: the default folder (figures/, figures-smoke/)
    data: Path | None  # None: <repo>/data
    runner: bool  # executed by the course's runner, which writes the claims when it finishes


def boolean(name: str, env=None) -> bool:
    """The boolean MINATTN_* variable `name` (unset or empty: False)."""
    raw = (os.environ if env is None else env).get(name, "")
    value = raw.strip().lower()
    if value in TRUE or value in FALSE or not value:
        return value in TRUE
    raise SettingsError(f"{name}={raw}: expected 0, 1, true, false, yes, no, on or off")


def _folder(name: str, env) -> Path | None:
    raw = env.get(name, "").strip()
    if not raw:
        return None
    if Path(raw).exists() and not Path(raw).is_dir():
        raise SettingsError(f"{name}={raw}: expected a folder, and this is a file")
    return Path(raw)


def settings(env=None) -> Settings:
    """Every MINATTN_* variable of `env` (default: this process's environment), checked.

    Raises SettingsError naming the first variable refused and its allowed values."""
    env = os.environ if env is None else env
    for name in sorted(env):
        if name.startswith("MINATTN_") and name not in NAMES:
            raise SettingsError(f"{name}={env[name]}: not a setting of the course (they are "
                                f"{', '.join(NAMES)})")
    smoke = boolean("MINATTN_SMOKE", env)
    raw = env.get("MINATTN_SCALE", "")
    scale = raw.strip().lower() or "full"
    if scale not in SCALES:
        raise SettingsError(f"MINATTN_SCALE={raw}: expected full or paper (or smoke)")
    if smoke and scale == "paper":
        raise SettingsError("MINATTN_SMOKE=1 and MINATTN_SCALE=paper contradict each other: "
                            "unset one")
    raw = env.get("MINATTN_DEVICE", "")
    device = raw.strip().lower() or None
    if device is not None and not DEVICE.fullmatch(device):
        raise SettingsError(f"MINATTN_DEVICE={raw}: expected cpu, cuda or cuda:N")
    raw = env.get("MINATTN_SEED", "")
    try:
        seed = int(raw.strip() or "0")
    except ValueError:
        raise SettingsError(f"MINATTN_SEED={raw}: expected an integer (added to every "
                            "seed; default 0)") from None
    boolean("MINATTN_COMPILE_TESTS", env)
    return Settings(smoke=smoke or scale == "smoke", scale="smoke" if smoke else scale,
                    device=device, seed=seed, figures=_folder("MINATTN_FIGURES", env),
                    data=_folder("MINATTN_DATA", env), runner=boolean("MINATTN_RUNNER", env))
