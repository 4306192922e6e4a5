"""Scaled dot-product and multi-head attention (lesson 01). Read top down:

    reference.py  the NumPy reference (the math) and its torch twins, line for line
    checks.py     the input checks they share
    fast.py       attention_fast_torch: the same output through PyTorch's fused kernel
    scaling.py    why √d: how sensitive each softmax row is, scaled and unscaled
    model.py      MultiHeadAttention and lesson 01's demo models
    data.py       lesson 01's tasks
    train.py      training the demo models on the tasks, and what the lesson reads off a run
    claims.py     the paper claims lesson 01 tests, each decided from its raw numbers
"""

from .checks import (
    MHA_PARAMS,
    check_additive_inputs,
    check_attention_inputs,
    check_heads,
    check_lengths,
    check_mha_inputs,
    check_mha_params,
    check_sinusoid,
    check_softmax_inputs,
    check_table_sizes,
    check_tokens,
    visible_inputs,
    visible_mha_inputs,
)
from .data import associative_recall, reversal
from .fast import attention_fast_torch
from .model import (
    MultiHeadAttention,
    PositionReader,
    RecallAttention,
    RecallMeanPool,
    check_recall_inputs,
)
from .reference import (
    additive_scores_np,
    additive_scores_torch,
    attention_backward_np,
    attention_np,
    attention_torch,
    causal_mask_np,
    causal_mask_torch,
    merge_heads_np,
    merge_heads_torch,
    multi_head_attention_np,
    online_attention_np,
    online_attention_torch,
    padding_mask_np,
    padding_mask_torch,
    sinusoid_np,
    sinusoid_torch,
    softmax_np,
    softmax_torch,
    split_heads_np,
    split_heads_torch,
)
from .scaling import softmax_rows_np
from .train import (
    most_frequent_value_accuracy,
    recall_accuracy,
    recall_loss,
    reversal_loss,
    steps_to,
    train_recall,
    train_reversal,
)

__all__ = [
    "MHA_PARAMS", "check_additive_inputs", "check_attention_inputs", "check_heads",
    "check_lengths", "check_mha_inputs", "check_mha_params", "check_sinusoid",
    "check_softmax_inputs", "check_table_sizes", "check_tokens", "visible_inputs",
    "visible_mha_inputs", "associative_recall", "reversal", "attention_fast_torch",
    "MultiHeadAttention", "PositionReader", "RecallAttention", "RecallMeanPool",
    "check_recall_inputs", "additive_scores_np", "additive_scores_torch", "attention_backward_np",
    "attention_np", "attention_torch", "causal_mask_np", "causal_mask_torch", "merge_heads_np",
    "merge_heads_torch", "multi_head_attention_np", "online_attention_np", "online_attention_torch",
    "padding_mask_np", "padding_mask_torch",
    "sinusoid_np", "sinusoid_torch", "softmax_np", "softmax_torch", "split_heads_np",
    "split_heads_torch", "most_frequent_value_accuracy", "recall_accuracy", "recall_loss",
    "reversal_loss", "steps_to", "train_recall", "train_reversal", "softmax_rows_np",
]
