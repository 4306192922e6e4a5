"""Attention in LSTM models (Snell et al. 2021, "Approximating How Single Head Attention
Learns"), lesson 05 — read top down:

    reference   the math: LSTM cell, Luong attention, output network, lexical probes; NumPy, torch
    agreement   the agreement metric A(a, b), and the paper's Table 2 computed with it
    model       Seq2SeqAttention, AttentionClassifier (the trainable models)
    official    the authors' copy model (projected heads) and the map from their names
    copy_task   training copy models as the authors' code does; the multi-head study
    data        the keyword task, vocabularies, the copying corpora (shared with lesson 06)
"""

from .agreement import (
    agreement_baseline_np,
    agreement_np,
    agreement_row_np,
    agreement_torch,
    check_agreement,
    contextualized_agreement,
    mean_agreement_np,
    random_baseline_np,
)
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
    train_copy,
    with_heads,
)
from .data import (
    BOS,
    PAD,
    UNK,
    build_vocab,
    check_length_range,
    copy_ids,
    dictionary_corpus,
    encode_sentences,
    keyword_task,
    permutation_corpus,
    two_sets_corpus,
)
from .model import AttentionClassifier, Seq2SeqAttention
from .official import (
    AttentionHead,
    OfficialSeq2Seq,
    no_attention_ceiling,
    projected_attention_np,
    projected_attention_torch,
    seq2seq_official_to_ours,
)
from .reference import (
    bilstm_np,
    check_classifier,
    check_classifier_probe,
    check_decoder_encoder_states,
    check_lstm_cell,
    check_luong,
    check_output,
    check_probe,
    check_source_mask,
    classifier_np,
    classifier_probe_np,
    classifier_probe_torch,
    classifier_torch,
    lexical_probe_np,
    lexical_probe_torch,
    log_softmax_np,
    lstm_cell_np,
    lstm_cell_torch,
    lstm_np,
    luong_attention_np,
    luong_attention_torch,
    output_np,
    output_torch,
    sigmoid_np,
)

__all__ = [
    "check_decoder_encoder_states", "check_source_mask", "check_lstm_cell", "sigmoid_np",
    "lstm_cell_np", "lstm_np", "bilstm_np", "luong_attention_np", "check_luong", "check_output",
    "output_np", "log_softmax_np", "lexical_probe_np", "check_probe", "check_classifier",
    "classifier_np", "classifier_probe_np", "check_classifier_probe", "lstm_cell_torch",
    "luong_attention_torch", "output_torch", "lexical_probe_torch", "classifier_torch",
    "classifier_probe_torch", "check_agreement", "agreement_np", "agreement_baseline_np",
    "contextualized_agreement", "agreement_torch", "mean_agreement_np", "random_baseline_np",
    "agreement_row_np", "Seq2SeqAttention", "AttentionClassifier", "projected_attention_np",
    "projected_attention_torch", "AttentionHead", "OfficialSeq2Seq", "seq2seq_official_to_ours",
    "no_attention_ceiling", "LEARNED", "BAD", "CopyTask", "copy_loss", "copy_metrics", "train_copy",
    "learned", "learned_at", "with_heads", "head_status", "draw_heads", "sample_heads",
    "distinct_combinations", "dictionary_corpus", "check_length_range", "permutation_corpus",
    "two_sets_corpus", "copy_ids", "keyword_task", "PAD", "UNK", "BOS", "build_vocab",
    "encode_sentences",
]
