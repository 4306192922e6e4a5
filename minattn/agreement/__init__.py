"""Attention agrees with the lexical probe (Snell et al. 2021, "Approximating How Single Head
Attention Learns", §3.1-3.2, §6.1, Table 2), lesson 08 — read top down:

    reference   the attention classifier (a bidirectional LSTM read by an MLP attention) and
                its lexical probe; NumPy, then torch
    metric      the agreement metric A(a, b), its random baseline, the contextualised
                agreement ξ, and one row of Table 2 from recorded runs
    model       AttentionClassifier and Seq2SeqAttention (Luong's translator), the two models
                of Table 2
    train       runs that record attention and probe at the authors' checkpoints
    data        the keyword task, vocabularies, and the real data sets (with offline fallbacks)
    claims      the paper's claims lesson 08 tests, each decided from its raw numbers

It builds on lesson 05's package (`minattn.lstm_attention`: the LSTM, Luong attention, the
output network and the probe); that package never imports this one.
"""

from .data import (
    BOS,
    PAD,
    UNK,
    build_vocab,
    encode_sentences,
    keyword_task,
    parallel_data,
    sentiment_data,
)
from .metric import (
    agreement_baseline_np,
    agreement_np,
    agreement_row_np,
    agreement_torch,
    check_agreement,
    contextualized_agreement,
    mean_agreement_np,
    random_baseline_np,
)
from .model import AttentionClassifier, Seq2SeqAttention
from .reference import (
    bilstm_np,
    check_classifier,
    check_classifier_probe,
    classifier_np,
    classifier_probe_np,
    classifier_probe_torch,
    classifier_torch,
)
from .train import checkpoints, length_batches_forever, recorded_run, table2_rows

__all__ = [
    "bilstm_np", "check_classifier", "classifier_np", "classifier_probe_np",
    "check_classifier_probe", "classifier_torch", "classifier_probe_torch", "check_agreement",
    "agreement_np", "agreement_torch", "agreement_baseline_np", "contextualized_agreement",
    "mean_agreement_np", "random_baseline_np", "agreement_row_np", "Seq2SeqAttention",
    "AttentionClassifier", "checkpoints", "recorded_run", "table2_rows", "length_batches_forever",
    "keyword_task", "PAD", "UNK", "BOS", "build_vocab", "encode_sentences", "sentiment_data",
    "parallel_data",
]
