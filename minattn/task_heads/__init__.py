"""Task-specific attention heads over a frozen encoder (Jia, "Task-specific attention",
Stanford CS224N poster, 2024), lesson 07 — read top down:

    reference   the math: pooling, layer norm, the attention and cross-attention heads, the
                Pearson loss; NumPy, then torch
    fast        attention_pool_fast_torch: a one-layer head's single query without projecting
                every token
    baselines   pair_features, best_threshold, LinearProbe, drop_token
    model       AttentionPool, CrossAttentionPool, Standardize, SentenceClassifier, PairModel
    train       Task, fit (train until the validation score stops rising), finetune (LP-FT's
                second stage), predict, by_length,
                drop_effects (what removing the token a head weighs most does), per_run,
                mean_std, results_table (results over seeds)
    data        Bible verse pairs where word overlap cannot decide, their splits, offline
                stand-ins
    claims      the poster's claims, each decided from the lesson's raw numbers
"""

from .baselines import LinearProbe, best_threshold, drop_token, pair_features
from .data import (
    NEGATIVE_WORDS,
    POSITIVE_WORDS,
    SPLIT_NAMES,
    BiblePairs,
    bible_pairs,
    content_words,
    jaccard,
    lesson_texts,
    pair_rows,
    random_token_states,
    template_sentiment,
    template_verses,
)
from .fast import attention_pool_fast_torch
from .model import (
    AttentionPool,
    CrossAttentionPool,
    PairModel,
    SentenceClassifier,
    Standardize,
    attention_entropy_ratio,
    attention_layers,
    mean_entropy_ratio,
    u09_init_,
    uniform_scale_note,
)
from .reference import (
    LN_EPS,
    attention_pool_np,
    check_layer_norm,
    check_module_input,
    check_pair,
    check_pearson,
    check_read,
    check_token_states,
    cls_pool_np,
    cls_pool_torch,
    cross_attention_pool_np,
    layer_norm_np,
    layer_norm_torch,
    mean_pool_np,
    mean_pool_torch,
    pearson_loss_np,
    pearson_loss_torch,
)
from .train import (
    Task,
    by_length,
    drop_effects,
    finetune,
    fit,
    mean_std,
    per_run,
    predict,
    results_table,
)

__all__ = [
    "LN_EPS", "check_token_states", "check_pair", "check_read", "check_pearson", "check_layer_norm",
    "check_module_input", "cls_pool_np", "mean_pool_np", "layer_norm_np", "attention_pool_np",
    "cross_attention_pool_np", "pearson_loss_np", "cls_pool_torch", "mean_pool_torch",
    "layer_norm_torch", "pearson_loss_torch", "attention_pool_fast_torch", "pair_features",
    "best_threshold", "LinearProbe", "drop_token", "u09_init_", "attention_layers", "AttentionPool",
    "CrossAttentionPool", "attention_entropy_ratio", "mean_entropy_ratio", "uniform_scale_note",
    "SentenceClassifier", "PairModel", "Standardize", "content_words", "jaccard", "BiblePairs",
    "bible_pairs", "lesson_texts", "pair_rows", "SPLIT_NAMES", "random_token_states",
    "POSITIVE_WORDS", "NEGATIVE_WORDS", "template_sentiment", "template_verses", "Task", "fit",
    "predict", "by_length", "drop_effects", "finetune", "per_run", "mean_std", "results_table",
]
