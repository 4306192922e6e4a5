"""Transformer-XL (Dai et al. 2019), lesson 04 — read top down:

    reference   the math: relative attention (the four terms), the memory update; NumPy, then torch
    fast        the relative shift: the same numbers without the gather
    model       RelMultiHeadAttention, XLLayer, TransformerXL; VanillaLM (the baseline)
    decoder     cached evaluation (eval_speed) and XLDecoder (one token at a time, a KV cache)
    official    the authors' checkpoint names -> ours
    claims      the paper claims lesson 04 tests, each decided from its raw numbers
    data        character streams, the bigram baseline, the delayed copy, recall by class
    train       evaluation (bpc), sampling, the stop-gradient experiment, the training command

`train` is not re-exported here: it is a command (`python -m minattn.xl.train`), which a
package that imported it first would run twice; import it as `from minattn.xl.train import ...`.
"""

from ..attention import sinusoid_np, sinusoid_torch  # the table lesson 01 builds
from .data import (
    ClassRecall,
    bigram_bpc,
    char_corpus,
    delayed_copy,
    lm_segment,
    lm_streams,
    recall_by_class,
    synthetic_text,
)
from .decoder import XLDecoder, eval_speed
from .fast import rel_attention_fast_torch, rel_shift_np, rel_shift_torch
from .model import RelMultiHeadAttention, TransformerXL, VanillaBlock, VanillaLM, XLLayer
from .official import official_to_ours
from .reference import (
    REL_PARAMS,
    check_layer_inputs,
    check_memory_update,
    check_rel_inputs,
    check_rel_params,
    rel_attention_np,
    rel_attention_torch,
    rel_multi_head_attention_np,
    relative_distances_np,
    relative_distances_torch,
    update_memory_np,
    update_memory_torch,
)

__all__ = [
    "check_rel_inputs", "check_memory_update", "sinusoid_np",
    "relative_distances_np", "rel_attention_np", "rel_multi_head_attention_np", "update_memory_np",
    "REL_PARAMS", "check_rel_params", "check_layer_inputs", "sinusoid_torch",
    "relative_distances_torch", "rel_attention_torch", "update_memory_torch", "rel_shift_np",
    "rel_shift_torch", "rel_attention_fast_torch", "RelMultiHeadAttention", "XLLayer",
    "TransformerXL", "VanillaBlock", "VanillaLM", "eval_speed", "XLDecoder", "official_to_ours",
    "bigram_bpc", "char_corpus", "lm_streams", "lm_segment", "synthetic_text", "delayed_copy",
    "ClassRecall", "recall_by_class",
]
