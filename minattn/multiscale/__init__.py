"""Multi-scale attention and the Multi-Scale Transformer (lesson 03; Guo et al., AAAI 2020).

Read top down:

    reference.py  per-head windows, scale allocation, the measured scale: NumPy, then torch
    fast.py       the same attention, heads grouped by scale, each group on the cheapest kernel
    analysis.py   what trained heads do: uniform weights, departure, pretrained heads' scales
    model.py      MultiScaleKernel, NodeReadout, MultiScaleTransformer
    baselines.py  the Transformer, BiLSTM and linear baselines
    data.py       lesson 03's tasks and GloVe corpus
    train.py      the lesson's training runs (synthetic tasks, sentence classifiers)
    claims.py     the paper claims lesson 03 tests, decided from their raw numbers
    figures.py    the lesson's figures
"""

from . import claims
from .analysis import (
    departure_np,
    departure_torch,
    drop_keys_np,
    drop_keys_torch,
    head_statistics_torch,
    pretrained_head_scales,
    uniform_weights_np,
    uniform_weights_torch,
)
from .baselines import (
    BiLSTMClassifier,
    TransformerBaseline,
    bag_of_words,
    fit_logistic_regression,
    mean_vectors,
)
from .data import (
    GLOVE_PAD,
    GLOVE_UNK,
    PARTNER_FILLER,
    PARTNER_X,
    PARTNER_Y,
    PARTNER_Z,
    effective_scale_task,
    glove_corpus,
    partner_task,
)
from .fast import (
    BAND_FROM,
    DENSE_BELOW,
    PIECE_KINDS,
    WINDOW_SPAN_SHARE,
    band_attention_cpu,
    band_masked_attention_torch,
    band_pieces,
    band_pieces_np,
    multiscale_attention_fast_torch,
)
from .model import (
    MultiScaleKernel,
    MultiScaleTransformer,
    NodeReadout,
    check_classifier_inputs,
    masked_max_torch,
)
from .reference import (
    ScaleAllocation,
    allocate_scales_np,
    check_measured_scale_inputs,
    check_multiscale_inputs,
    combine_masks,
    layer_windows,
    measured_scale_np,
    measured_scale_torch,
    multiscale_attention_np,
    multiscale_attention_torch,
    scale_candidates,
    scale_mask_np,
    scale_mask_torch,
)
from .train import fit_effective_scale, fit_partner, fit_sentences, right_per_sentence

__all__ = [
    "departure_np", "departure_torch", "drop_keys_np", "drop_keys_torch", "head_statistics_torch",
    "pretrained_head_scales", "uniform_weights_np", "uniform_weights_torch", "BiLSTMClassifier",
    "TransformerBaseline", "bag_of_words", "fit_logistic_regression", "mean_vectors", "GLOVE_PAD",
    "GLOVE_UNK", "PARTNER_FILLER", "PARTNER_X", "PARTNER_Y", "PARTNER_Z", "effective_scale_task",
    "glove_corpus", "partner_task", "BAND_FROM", "DENSE_BELOW", "PIECE_KINDS", "WINDOW_SPAN_SHARE",
    "band_attention_cpu", "band_masked_attention_torch", "band_pieces", "band_pieces_np",
    "multiscale_attention_fast_torch", "MultiScaleKernel", "MultiScaleTransformer", "NodeReadout",
    "check_classifier_inputs", "masked_max_torch", "ScaleAllocation", "allocate_scales_np",
    "check_measured_scale_inputs", "check_multiscale_inputs", "combine_masks", "layer_windows",
    "measured_scale_np", "measured_scale_torch", "multiscale_attention_np",
    "multiscale_attention_torch", "scale_candidates", "scale_mask_np", "scale_mask_torch",
    "claims", "fit_effective_scale", "fit_partner", "fit_sentences", "right_per_sentence",
]
