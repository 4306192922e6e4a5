"""Attention in LSTM models (Snell et al. 2021, "Approximating How Single Head Attention
Learns"), lesson 05 — read top down:

    reference   the math: LSTM cell, Luong attention, output network, lexical probe, and the
                scores' gradient (why attention follows the probe); NumPy, then torch
    official    the authors' copy model (projected heads) and the map from their names
    copy_task   training copy models as the authors' code does; the multi-head study
    data        the copying corpora (shared with lesson 06)
    claims      the paper's claims lesson 05 tests, each decided from its raw numbers

Lesson 08 (`minattn.agreement`) builds the classifier, the translation model and the agreement
metric of the paper's Table 2 on top of this package.
"""

from .copy_task import (
    BAD,
    LEARNED,
    CopyTask,
    copy_loss,
    copy_metrics,
    distinct_combinations,
    draw_heads,
    head_status,
    learned,
    learned_at,
    sample_heads,
    still_climbing,
    train_copy,
    with_heads,
)
from .data import (
    check_length_range,
    copy_ids,
    dictionary_corpus,
    permutation_corpus,
    two_sets_corpus,
)
from .official import (
    AttentionHead,
    OfficialSeq2Seq,
    no_attention_ceiling,
    projected_attention_np,
    projected_attention_torch,
    seq2seq_official_to_ours,
)
from .reference import (
    check_decoder_encoder_states,
    check_lstm_cell,
    check_luong,
    check_output,
    check_probe,
    check_score_gradient,
    check_source_mask,
    lexical_probe_np,
    lexical_probe_torch,
    log_softmax_np,
    lstm_cell_np,
    lstm_cell_torch,
    lstm_np,
    luong_attention_np,
    luong_attention_torch,
    output_gradient_np,
    output_np,
    output_torch,
    score_gradient_np,
    sigmoid_np,
)

__all__ = [
    "check_decoder_encoder_states", "check_source_mask", "check_lstm_cell", "sigmoid_np",
    "lstm_cell_np", "lstm_np", "luong_attention_np", "check_luong", "check_output", "output_np",
    "log_softmax_np", "lexical_probe_np", "check_probe", "output_gradient_np",
    "score_gradient_np", "check_score_gradient", "lstm_cell_torch", "luong_attention_torch",
    "output_torch", "lexical_probe_torch", "projected_attention_np", "projected_attention_torch",
    "AttentionHead", "OfficialSeq2Seq", "seq2seq_official_to_ours", "no_attention_ceiling",
    "LEARNED", "BAD", "CopyTask", "copy_loss", "copy_metrics", "train_copy", "learned",
    "learned_at", "still_climbing", "with_heads", "head_status", "draw_heads", "sample_heads",
    "distinct_combinations", "dictionary_corpus", "check_length_range", "permutation_corpus",
    "two_sets_corpus", "copy_ids",
]
