"""Every paper claim a lesson tests can fail: each registered claim function
(`@claim_rule` in minattn/<package>/claims.py) is fed the numbers that should reproduce it and
the numbers that should contradict it, and must say so. A claim that cannot come out
otherwise is a defect this test finds."""

import importlib
import pkgutil

import pytest

import minattn
from minattn.course.claims import RULES, claim_rule
from minattn.course.verdict import CONTRADICTED, OUTCOMES, REPRODUCED, compare


def _claim_modules():
    names = [f"minattn.{m.name}.claims" for m in pkgutil.iter_modules(minattn.__path__)
             if m.ispkg and m.name not in ("course", "fast")
             and importlib.util.find_spec(f"minattn.{m.name}.claims")]
    return [importlib.import_module(name) for name in names]


MODULES = _claim_modules()
NAMES = sorted(RULES)


def test_the_lessons_register_their_claims():
    assert MODULES, "no minattn/<package>/claims.py found"
    for module in MODULES:
        assert any(name.startswith(module.__name__.removeprefix("minattn.")) for name in RULES), (
            f"{module.__name__} registers no claim")


@pytest.mark.parametrize("name", NAMES)
def test_every_claim_can_be_reproduced_and_can_fail(name):
    rule = RULES[name]
    yes, no = rule(**rule.reproduced_by), rule(**rule.contradicted_by)
    assert yes.verdict == REPRODUCED, f"{name}: its reproducing numbers gave {yes}"
    assert no.verdict == CONTRADICTED, f"{name}: its contradicting numbers gave {no}"
    for v in (yes, no):
        assert v.finding and v.rule == name and isinstance(v.raw, dict)
    assert yes.finding != no.finding, f"{name}: the same sentence whatever the outcome"


def test_a_claim_rule_records_its_name_and_raw_numbers():
    @claim_rule(reproduced_by=dict(a=[2.0, 2.1], b=1.0), contradicted_by=dict(a=[0.0, 0.1], b=1.0))
    def toy(*, a, b):
        return compare(a, b, ">").says(reproduced="up", contradicted="down", inconclusive="?",
                                       not_tested="-")

    try:
        import numpy as np

        v = toy(a=np.array([2.0, 2.1]), b=np.float32(1.0))
        assert v.verdict in OUTCOMES and v.rule.endswith("test_claims.toy")
        assert v.raw == {"a": [2.0, 2.1], "b": 1.0} and v.finding == "up"
        with pytest.raises(TypeError, match="keyword-only"):
            claim_rule(reproduced_by={}, contradicted_by={})(lambda a: None)
        with pytest.raises(ValueError, match="no sentence"):
            compare(1.0, 0.0).says(reproduced=None, contradicted="", inconclusive="",
                                   not_tested="")
    finally:
        RULES.pop(toy.__wrapped__.__module__.removeprefix("minattn.") + ".toy", None)


def test_a_saved_claim_is_decided_again_by_todays_rule():
    """`redecide` reads a claims.json entry (rule name + raw numbers) with the rule as it is
    now: the same numbers give the same outcome, changed numbers a changed one."""
    from minattn.course.claims import redecide

    def saved_toy(*, a, b):
        return compare(a, b, ">").says(reproduced="up", contradicted="down", inconclusive="?",
                                       not_tested="-")

    saved_toy.__module__ = "minattn.course.claims"  # a module redecide can import
    claim_rule(reproduced_by=dict(a=[2.0, 2.1], b=1.0),
               contradicted_by=dict(a=[0.0, 0.1], b=1.0))(saved_toy)
    name = "course.claims.saved_toy"
    try:
        rule = RULES[name]
        saved = [dict(claim="yes", rule=name, raw=rule(**rule.reproduced_by).raw),
                 dict(claim="no", rule=name, raw=rule(**rule.contradicted_by).raw)]
        assert [v.verdict for v in redecide(saved)] == [REPRODUCED, CONTRADICTED]
        same = dict(saved[0]["raw"], a=[1.0, 1.0])
        again = redecide([dict(claim="tie", rule=name, raw=same)])[0]
        assert again.verdict != REPRODUCED
        with pytest.raises(KeyError, match="no claim rule"):
            redecide([dict(claim="gone", rule=name + "_gone", raw={})])
    finally:
        RULES.pop(name, None)
