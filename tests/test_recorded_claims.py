"""The full-mode runs saved in benchmarks/results/cpu-full-*/ (every lesson's claims.json of a
`make course` run on a fresh clone, with the per-run numbers): today's rule decides each saved
claim as it was decided, and each claim could have failed on the lesson's own numbers — the
same numbers with the effect reversed (same runs, same spread) come out the other way, and the
opposite outcome is reachable at the lesson's sample size, unless the lesson says the claim can
only be confirmed there."""

import json
from pathlib import Path

import pytest

from minattn.course.stats import CONTRADICTED, REPRODUCED, redecide, reversed_effect

ROOT = Path(__file__).resolve().parents[1]
SAVED = sorted((ROOT / "benchmarks" / "results").glob("cpu-full-*/*.json"))
CLAIMS = [(path, i, c) for path in SAVED
          for i, c in enumerate(json.loads(path.read_text(encoding="utf-8")))]


def _id(item):
    path, i, c = item
    return f"{path.parent.name}/{path.stem}#{i}"


def test_a_full_run_is_saved():
    assert SAVED, "no benchmarks/results/cpu-full-*/ folder holds a full run's claims"


@pytest.mark.parametrize("item", CLAIMS, ids=[_id(c) for c in CLAIMS])
def test_a_saved_claim_is_decided_again_as_it_was(item):
    path, _, c = item
    again = redecide(c["test"])
    assert (again.outcome, again.computed) == (c["test"]["outcome"], c["test"]["computed"]), \
        f"{path.name}: {c['claim']}"


@pytest.mark.parametrize("item", CLAIMS, ids=[_id(c) for c in CLAIMS])
def test_a_saved_claim_could_have_failed_on_its_own_numbers(item):
    path, _, c = item
    if c.get("confirm_only"):
        pytest.skip(f"the lesson says this claim can only be confirmed: {c['confirm_only']}")
    assert CONTRADICTED in c["test"]["reachable"], f"{path.name}: {c['claim']} cannot fail"
    if c["test"]["computed"] == REPRODUCED:
        flipped = redecide(reversed_effect(c["test"]))
        assert flipped.outcome == CONTRADICTED or flipped.computed == CONTRADICTED, \
            f"{path.name}: {c['claim']}: reversed, it came out {flipped.outcome}"
