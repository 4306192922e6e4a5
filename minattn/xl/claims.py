"""The paper claims lesson 04 tests, each decided from its raw numbers by the course's rule.

From Dai et al., "Transformer-XL: Attentive Language Models Beyond a Fixed-Length Context"
(2019): the reach of the recurrence (§3.2, Fig. 2), the ablation of recurrence and relative
positions (Table 6, WikiText-103; Table 7, One Billion Word), the enwik8 comparison with a
vanilla Transformer (Table 2), longer memories at evaluation (§4.2, Table 6) and the
evaluation speed (Table 9); and two questions of the lesson's own about what training learns
to use. Each function takes what the lesson measured and returns a `Verdict` with its
finding in words; tests/test_claims.py feeds every one of them numbers that contradict it.

Language-model arms are bits per character (lower is better) as [run][stream] tables: one row
per seed, one value per validation stream. Every arm reads the same streams, so comparisons
are paired over them (`verdict.paired`: the streams' spread and the seeds' spread together).
Their gate: every run beats the bigram model of the training text, i.e. learned more than
which character follows which, so a comparison between arms is one between trained models.
Recall by class gives [run][read] tables of hits (1 right, 0 wrong) on the same reads.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..course.claims import claim_rule
from ..course.verdict import (
    CONTRADICTED,
    INCONCLUSIVE,
    REPRODUCED,
    Gate,
    combine,
    compare,
    paired,
    same,
    versus,
)

# Table 6, WikiText-103 perplexity of the 128M model with the paper's encoding and full loss:
# without recurrence, read alone ("PPL init"); the same model given a longer attention at
# evaluation ("PPL best", attention 260); trained with the recurrence ("PPL init").
TABLE6_ALONE, TABLE6_MEMORY_AT_EVAL, TABLE6_XL = 29.59, 29.02, 27.02
# The share of the recurrence's gain that comes from *training* with it, in log perplexity
# (scale-free, so it carries over to bits per character): about 0.79.
TRAINING_SHARE = math.log(TABLE6_MEMORY_AT_EVAL / TABLE6_XL) / math.log(TABLE6_ALONE / TABLE6_XL)


def _learned(bigram: float, *arms) -> list[Gate]:
    """The language models' gate: every run (its mean over the streams) beats the bigram
    model (bits per character)."""
    runs = [float(np.mean(run)) for arm in arms for run in arm]
    beat = sum(v < bigram for v in runs)
    return [Gate(beat == len(runs), "budget",
                 f"{beat} of {len(runs)} runs beat the bigram model's {bigram:.3f} bpc")]


def _mean(values) -> float:
    """The mean over every run (and item): a per-run list or a [run][item] table."""
    return float(np.mean(values))


def _minus(a, b):
    """a − b item by item, for two [run][item] tables of the same runs read two ways."""
    return (np.asarray(a, dtype=float) - np.asarray(b, dtype=float)).tolist()


def _line(values, line: float):
    """A [run][item] table of the same shape as `values`, every entry `line`."""
    return np.full(np.shape(values), float(line)).tolist()


@claim_rule(reproduced_by=dict(layers=[1, 2, 3], reach=[31, 47, 63], seg_len=16, mem_len=16),
            contradicted_by=dict(layers=[1, 2, 3], reach=[16, 32, 48], seg_len=16, mem_len=16))
def reach_grows_with_depth(*, layers, reach, seg_len, mem_len):
    """§3.2, Fig. 2: the longest dependency grows by one memory per layer: the last token of a
    segment sees L − 1 + N·M tokens back with N layers. Exact counts on untrained models."""
    formula = [(seg_len - 1) + n * mem_len for n in layers]
    verdict = combine(*(same(float(r), float(f), tolerance=0) for r, f in zip(reach, formula)))
    return verdict.says(
        reproduced=f"The reach is exactly L − 1 + N·M ({', '.join(map(str, reach))} tokens for "
                   f"{', '.join(map(str, layers))} layers): one memory further back per layer.",
        partly="The reach matches L − 1 + N·M for some depths and not for others.",
        contradicted="The reach does not grow by one memory per layer.",
        inconclusive="(exact counts are never inconclusive)",
        not_tested="The reach was not measured.")


def _streams(*runs, spread=0.02):
    """Test numbers: each run's value on 4 streams (items), the streams differing by ±spread."""
    return [[v - 1.5 * spread, v - spread / 2, v + spread / 2, v + 1.5 * spread] for v in runs]


@claim_rule(reproduced_by=dict(relative=_streams(2.50, 2.51, 2.49),
                               vanilla=_streams(2.65, 2.66, 2.64),
                               xl=_streams(2.42, 2.43, 2.41), bigram=3.3),
            contradicted_by=dict(relative=_streams(2.70, 2.71, 2.69),
                                 vanilla=_streams(2.65, 2.66, 2.64),
                                 xl=_streams(2.42, 2.43, 2.41), bigram=3.3))
def relative_beats_absolute(*, relative, vanilla, xl, bigram):
    """Table 6 (no recurrence, half loss): relative positions beat absolute ones — 30.10 vs
    30.97 (Vaswani et al.) perplexity. Ours: bits per character [run][stream], each segment
    read alone, relative vs vanilla, paired over the validation streams. The finding also says
    which share of XL's whole gain over the vanilla model this is."""
    verdict = paired(relative, vanilla, "<", gates=_learned(bigram, relative, vanilla, xl))
    gain = _mean(vanilla) - _mean(xl)
    share = (f", {(_mean(vanilla) - _mean(relative)) / gain:.0%} of XL's whole gain over the "
             "vanilla model" if gain > 0 else "; XL itself does not beat the vanilla model here")
    return verdict.says(
        reproduced=f"Relative positions alone, without any memory, beat absolute ones by "
                   f"{_mean(vanilla) - _mean(relative):.3f} bpc{share}.",
        contradicted="Without memory, the relative model is worse than the vanilla one.",
        inconclusive="These seeds cannot tell the relative model without memory from the "
                     "vanilla one.",
        not_tested="Some runs did not even beat the bigram model: the comparison is not one "
                   "of trained models.")


@claim_rule(reproduced_by=dict(xl=_streams(2.42, 2.43, 2.41),
                               relative_alone=_streams(2.50, 2.51, 2.49), bigram=3.3),
            contradicted_by=dict(xl=_streams(2.60, 2.61, 2.59),
                                 relative_alone=_streams(2.50, 2.51, 2.49), bigram=3.3))
def recurrence_beats_no_recurrence(*, xl, relative_alone, bigram):
    """Table 6 (PPL init): 27.02 with the recurrence vs 29.59 without; Table 7 (One Billion
    Word): 25.2 vs 27.1. Ours: XL with its training memory vs the relative model trained and
    read without memory, [run][stream], paired over the streams."""
    verdict = paired(xl, relative_alone, "<", gates=_learned(bigram, xl, relative_alone))
    return verdict.says(
        reproduced=f"XL with its memory beats the same model trained and read without one, by "
                   f"{_mean(relative_alone) - _mean(xl):.3f} bpc.",
        contradicted="XL with its memory is worse than the same model without recurrence.",
        inconclusive="These seeds cannot tell XL from the same model without recurrence.",
        not_tested="Some runs did not even beat the bigram model.")


@claim_rule(reproduced_by=dict(xl=_streams(2.30, 2.31, 2.29),
                               relative_memory=_streams(2.45, 2.46, 2.44),
                               relative_alone=_streams(2.50, 2.51, 2.49), bigram=3.3),
            contradicted_by=dict(xl=_streams(2.437, 2.404, 2.420),
                                 relative_memory=_streams(2.427, 2.439, 2.412),
                                 relative_alone=_streams(2.480, 2.491, 2.464), bigram=3.3))
def training_gives_most_of_recurrence_gain(*, xl, relative_memory, relative_alone, bigram):
    """Table 6 (full loss): the model without recurrence reads 29.59 alone and 29.02 given a
    longer attention at evaluation; trained with the recurrence, 27.02. So training with the
    memory gives most of the recurrence's gain — 79 % in log perplexity — and the memory at
    evaluation alone the rest. Ours, [run][stream]: XL; the relative model (trained without
    memory) given XL's memory at evaluation, and read alone. Training's share is more than
    half when relative_memory − XL > (relative_alone − XL) / 2, that is when
    relative_memory − relative_alone / 2 > XL / 2: the left side comes from the relative runs,
    the right from the XL runs, paired over the streams. Reproduced: more than half;
    contradicted: less than half."""
    gates = _learned(bigram, xl, relative_memory, relative_alone)
    left = (np.asarray(relative_memory) - np.asarray(relative_alone) / 2).tolist()
    verdict = paired(left, (np.asarray(xl) / 2).tolist(), ">", gates=gates)
    verdict = dataclasses.replace(
        verdict, detail="training's share of the recurrence gain > 1/2, i.e. relative_memory − "
                        f"relative_alone/2 > XL/2? {verdict.detail}")
    gain = _mean(relative_alone) - _mean(xl)
    share = (f"{(_mean(relative_memory) - _mean(xl)) / gain:.0%}" if gain > 0 else "nothing, "
             "as the recurrence gains nothing here,")
    paper = f"the paper: {TRAINING_SHARE:.0%}"
    return verdict.says(
        reproduced=f"Training with the memory gives most of the recurrence's gain (a share of "
                   f"{share}; "
                   f"{paper}): XL beats the model trained without memory and given the same "
                   f"memory at evaluation by {_mean(relative_memory) - _mean(xl):.3f} bpc.",
        contradicted=f"At this budget the memory at evaluation, not training with it, gives the "
                     f"recurrence's gain: training's share of it is {share} ({paper}). A model "
                     f"trained without memory, given the memory at evaluation, reads "
                     f"{_mean(relative_memory):.3f} bpc against XL's {_mean(xl):.3f} over "
                     f"{len(xl)} seeds.",
        inconclusive=f"These seeds cannot tell whether training with the memory gives more or "
                     f"less than half of the recurrence's gain (here {share}; {paper}).",
        not_tested="Some runs did not even beat the bigram model.")


@claim_rule(reproduced_by=dict(xl=_streams(2.42, 2.43, 2.41), sliding=_streams(2.55, 2.56, 2.54),
                               bigram=3.3),
            contradicted_by=dict(xl=_streams(2.62, 2.63, 2.61),
                                 sliding=_streams(2.55, 2.56, 2.54), bigram=3.3))
def xl_beats_sliding_window(*, xl, sliding, bigram):
    """Table 2 (enwik8, 12 layers): XL 1.06 vs Al-Rfou et al.'s vanilla Transformer 1.11 bpc,
    evaluated with a window that slides by one character per prediction. [run][stream],
    paired over the streams."""
    verdict = paired(xl, sliding, "<", gates=_learned(bigram, xl, sliding))
    return verdict.says(
        reproduced=f"XL beats the vanilla model even when the vanilla model slides its window "
                   f"by one character per prediction, by {_mean(sliding) - _mean(xl):.3f} bpc.",
        contradicted="The vanilla model with a sliding window beats XL.",
        inconclusive="These seeds cannot tell XL from the vanilla model with a sliding window.",
        not_tested="Some runs did not even beat the bigram model.")


@claim_rule(reproduced_by=dict(long=_streams(2.400, 2.411, 2.389),
                               training=_streams(2.402, 2.413, 2.391),
                               bigram=3.3, long_memory=128, training_memory=32),
            contradicted_by=dict(long=_streams(2.45, 2.46, 2.44),
                                 training=_streams(2.42, 2.43, 2.41),
                                 bigram=3.3, long_memory=128, training_memory=32))
def longer_memory_lowers_bpc(*, long, training, bigram, long_memory, training_memory):
    """Table 6: a longer attention at evaluation than in training lowers the perplexity
    (27.02 → 26.77 at attention 500, 128M; 23.43 → 23.09 at 640, 151M). Ours: each XL run on
    text with a memory of `long_memory` and with its training memory, [run][stream]: the same
    models on the same streams, so their differences decide (paired over streams and runs)."""
    diffs = _minus(long, training)
    verdict = paired(diffs, _line(diffs, 0.0), "<", gates=_learned(bigram, long, training))
    return verdict.says(
        reproduced=f"On text, a memory of {long_memory} at evaluation beats the training "
                   f"memory {training_memory}, by {-_mean(diffs):.4f} bpc.",
        contradicted=f"On text, a memory of {long_memory} at evaluation is worse than the "
                     f"training memory {training_memory}, by {_mean(diffs):.4f} bpc.",
        inconclusive=f"On text, these seeds cannot tell a memory of {long_memory} at evaluation "
                     f"from the training memory {training_memory} (difference "
                     f"{_mean(diffs):+.4f} bpc).",
        not_tested="Some runs did not even beat the bigram model.")


def _recall_gate(near, threshold=0.9) -> list[Gate]:
    """Recall by class: every run learned to recall the near reads (within the training memory)."""
    learned = sum(a >= threshold for a in near)
    return [Gate(learned == len(near), "budget", f"{learned} of {len(near)} runs recall at least "
                                                 f"{threshold:.0%} of the near reads")]


def _hits(rate, n=400, runs=3):
    """Test numbers: `runs` runs of n reads, the first round(rate · n) right."""
    return [[1.0] * round(rate * n) + [0.0] * (n - round(rate * n)) for _ in range(runs)]


@claim_rule(reproduced_by=dict(long=_hits(0.97), training=_hits(0.12), near=[0.99, 0.98, 0.99],
                               long_memory=128, training_memory=32),
            contradicted_by=dict(long=_hits(0.05), training=_hits(0.12), near=[0.99, 0.98, 0.99],
                                 long_memory=128, training_memory=32))
def short_trained_uses_long_memory(*, long, training, near, long_memory, training_memory):
    """§4.2: trained with a backpropagation length of 128, the model uses an attention length
    of 640 at test (Table 6). Ours: recall by class, the far reads (beyond one layer's reach at
    the training memory), right (1) or wrong (0) [run][read], with a memory of `long_memory`
    and with the training memory: the same models on the same reads, paired. Gate: the runs
    learned the near reads."""
    diffs = _minus(long, training)
    verdict = paired(diffs, _line(diffs, 0.0), ">", gates=_recall_gate(near))
    return verdict.says(
        reproduced=f"Given a memory of {long_memory} at evaluation, the model recalls far reads "
                   f"it never met in training ({_mean(long):.2f} against {_mean(training):.2f} "
                   f"with the training memory {training_memory}): it fetches by content, at "
                   "distances it was never trained on.",
        contradicted=f"A memory of {long_memory} at evaluation makes the far reads worse.",
        inconclusive=f"These runs cannot tell a memory of {long_memory} from the training "
                     "memory on the far reads.",
        not_tested="The runs did not learn to recall even the near reads.")


@claim_rule(reproduced_by=dict(two_layer=_hits(0.9), chance=0.125, near=[0.99, 0.98, 0.99]),
            contradicted_by=dict(two_layer=_hits(0.125), chance=0.125, near=[0.99, 0.98, 0.99]))
def two_layer_recall(*, two_layer, chance, near, tolerance=0.05):
    """§3.2, Fig. 2: through N layers a token reaches N memories back — what the architecture
    allows. Is it used? Recall by class with the training memory: the far reads that only two
    layers can reach (farther than M + i, within 2M + i for the read at index i), right (1) or
    wrong (0) [run][read]. Reproduced when they are answered above chance (knowing the class);
    contradicted when they are answered less than `tolerance` above chance (the 95 % interval,
    over reads and runs, below chance + tolerance)."""
    verdict = paired(two_layer, _line(two_layer, chance), ">", gates=_recall_gate(near))
    if verdict.verdict == INCONCLUSIVE:
        below = paired(two_layer, _line(two_layer, chance + tolerance), "<")
        if below.verdict == REPRODUCED:
            verdict = dataclasses.replace(below, verdict=CONTRADICTED, detail=(
                f"less than {tolerance:g} above chance {chance:g}? {below.detail}"))
    return verdict.says(
        reproduced=f"The reads that only two layers can reach are recalled ({_mean(two_layer):.2f}"
                   f" against chance {chance:.3f}): information does travel one memory further "
                   "back per layer in the trained model.",
        contradicted=f"No two-layer recall happens: the reads that only two layers can reach are "
                     f"answered no better than chance ({_mean(two_layer):.3f} against "
                     f"{chance:.3f}), though the architecture lets the model see them.",
        inconclusive="These runs cannot tell the two-layer reads from chance.",
        not_tested="The runs did not learn to recall even the near reads.")


@claim_rule(reproduced_by=dict(without_sg=[0.80, 0.85, 0.9], with_sg=[0.07, 0.06, 0.065],
                               one_layer=[0.99, 0.99, 0.98], chance=0.0625),
            contradicted_by=dict(without_sg=[0.065, 0.06, 0.07], with_sg=[0.07, 0.06, 0.065],
                                 one_layer=[0.99, 0.99, 0.98], chance=0.0625))
def stop_gradient_blocks_two_layer_path(*, without_sg, with_sg, one_layer, chance):
    """The lesson's explanation of why the copy task's two-layer path is not learned: the
    stop-gradient (§3.2) keeps the lower layer from ever being trained to fetch for it. Test:
    train without the stop-gradient for one segment; the positions only two layers can reach
    should rise. Reproduced when they rise significantly; contradicted when they rise
    significantly less than half-way from the stop-gradient runs to the one-layer positions'
    accuracy (equivalence within ± that half gap), or fall. Gate: the one-layer positions were
    learned (≥ 0.9)."""
    learned = sum(a >= 0.9 for a in one_layer)
    gates = [Gate(learned == len(one_layer), "budget", f"{learned} of {len(one_layer)} runs "
                                                        "copy at least 90 % of the one-layer "
                                                        "positions")]
    verdict = compare(without_sg, with_sg, ">", gates=gates)
    tolerance = max((_mean(one_layer) - _mean(with_sg)) / 2, 0.0)
    if verdict.verdict == INCONCLUSIVE:
        equal = same(without_sg, with_sg, tolerance)
        if equal.verdict == REPRODUCED:
            verdict = dataclasses.replace(
                equal, verdict=CONTRADICTED,
                detail=equal.detail + f": within ±{tolerance:.3g}, half the gap to the "
                                      "one-layer positions")
    return verdict.says(
        reproduced=f"Without the stop-gradient the two-layer positions rise from "
                   f"{_mean(with_sg):.2f} to {_mean(without_sg):.2f}: the stop-gradient is what "
                   "kept the lower layer from learning to fetch for them.",
        contradicted=f"The stop-gradient is not what blocks the two-layer path: with the "
                     f"gradient flowing one segment back, those positions do not rise "
                     f"({_mean(without_sg):.3f} without it, {_mean(with_sg):.3f} with it; "
                     f"chance {chance:.3f}).",
        inconclusive="These seeds cannot tell whether removing the stop-gradient helps the "
                     "two-layer positions.",
        not_tested="The runs did not learn even the positions one layer can reach.")


@claim_rule(reproduced_by=dict(short=[8.0, 8.3, 7.9, 8.1], long=[95.0, 99.0, 97.0, 96.0],
                               short_context=128, long_context=1024, much=10.0),
            contradicted_by=dict(short=[8.0, 8.3, 7.9, 8.1], long=[2.0, 2.1, 1.9, 2.0],
                                 short_context=128, long_context=1024, much=10.0))
def cached_evaluation_much_faster(*, short, long, short_context, long_context, much):
    """Table 9 (GPU): evaluation with the memory is 363× faster than a vanilla Transformer
    recomputing its context at attention length 800, 1,874× at 3,800: much faster, and more
    so the longer the context. Ours: speed-up ratios (vanilla recomputing / XL cached, time
    per token), one per interleaved repeat, at two contexts. Reproduced when the ratio at the
    long context is above `much` and larger than at the short one."""
    verdict = combine(versus(long, much, ">"), compare(long, short, ">"))
    return verdict.says(
        reproduced=f"Cached evaluation is {_mean(long):,.0f}× faster than recomputing at context "
                   f"{long_context}, against {_mean(short):,.0f}× at {short_context}: the "
                   "saving grows with the context.",
        partly=f"Cached evaluation is faster ({_mean(long):,.0f}× at context {long_context}, "
               f"{_mean(short):,.0f}× at {short_context}), but either not {much:g}× or not "
               "growing with the context.",
        contradicted=f"Cached evaluation is not {much:g}× faster at context {long_context}, "
                     "nor more so than at the short context.",
        inconclusive="These repeats cannot decide the speed-up.",
        not_tested="The speed was not measured.")
