"""The registry of claim functions: every paper claim a lesson tests is decided by one.

A claim function takes the claim's raw per-run numbers as keyword arguments and returns a
`Verdict` (from the rule in `minattn.course.verdict`) with its finding in words:

    @claim_rule(reproduced_by=dict(ours=[0.9, 0.92], chance=0.5),
                contradicted_by=dict(ours=[0.3, 0.32], chance=0.5))
    def beats_chance(*, ours, chance):
        return versus(ours, chance, ">").says(reproduced="...", contradicted="...", ...)

It lives in its mechanism's package (`minattn/<package>/claims.py`), where the tests find it
without running the lesson: tests/test_claims.py feeds every registered claim the numbers
that should reproduce it and the numbers that should contradict it. The Verdict it returns
carries its name and its raw numbers, which the lesson records in claims.json.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import numbers
from typing import Callable

from .verdict import Verdict

RULES: dict[str, Callable[..., Verdict]] = {}


def _plain(x):
    """A JSON-able copy of a claim's raw numbers (lists, floats, ints, bools, strings)."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (str, bool)) or x is None:
        return x
    if hasattr(x, "tolist"):  # NumPy arrays and scalars, torch tensors
        return _plain(x.tolist())
    if isinstance(x, numbers.Integral):
        return int(x)
    if isinstance(x, numbers.Real):
        return float(x)
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    raise TypeError(f"a claim's raw numbers must be numbers, strings, lists or dicts, got "
                    f"{type(x).__name__}")


def claim_rule(*, reproduced_by: dict, contradicted_by: dict):
    """Register a claim's verdict function: keyword arguments (the raw per-run numbers) in, a
    `Verdict` with its finding (`Verdict.says`) out. `reproduced_by` and `contradicted_by` are
    numbers that would reproduce and contradict the claim; tests/test_claims.py feeds both to
    every registered claim, so a claim that cannot fail cannot be registered unnoticed. The
    returned Verdict carries the rule's name and its raw numbers, so the course report can
    recompute it."""

    def register(fn):
        name = f"{fn.__module__.removeprefix('minattn.')}.{fn.__name__}"
        signature = inspect.signature(fn)
        if any(p.kind is not p.KEYWORD_ONLY for p in signature.parameters.values()):
            raise TypeError(f"{name}: a claim rule takes keyword-only arguments (def f(*, ...))")

        @functools.wraps(fn)
        def rule(**raw) -> Verdict:
            raw = _plain(raw)
            verdict = fn(**raw)
            if not isinstance(verdict, Verdict) or not verdict.finding:
                raise TypeError(f"{name} must return a Verdict with its finding "
                                "(end with .says(...))")
            return dataclasses.replace(verdict, rule=name, raw=raw)

        rule.reproduced_by, rule.contradicted_by = reproduced_by, contradicted_by
        RULES[name] = rule
        return rule

    return register


def redecide(saved: list[dict]) -> list[Verdict]:
    """Claims a run recorded (entries of its claims.json), each decided again by today's rule
    of the same name on the raw numbers the run recorded: a saved run read with current rules."""
    again = []
    for claim in saved:
        importlib.import_module("minattn." + claim["rule"].rsplit(".", 1)[0])  # registers it
        if claim["rule"] not in RULES:
            raise KeyError(f"no claim rule {claim['rule']!r} (claim {claim['claim']!r})")
        again.append(RULES[claim["rule"]](**claim["raw"]))
    return again
