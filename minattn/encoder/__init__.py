"""A pretrained sentence encoder in pure torch (all-MiniLM-L6-v2 on lesson 01's attention), shared
by lessons 03 and 07:

    model    BertConfig, EncoderLayer, MiniLMEncoder, TopLayers, load_minilm
    tokens   tokenising and batching, mean pooling, the token-state cache (token_states, ...)
"""

from .model import (
    BertConfig,
    EncoderLayer,
    MiniLMEncoder,
    TopLayers,
    bert_name,
    load_minilm,
    run_layers,
)
from .tokens import (
    TokenStates,
    check_texts,
    embed,
    encode_batch,
    fingerprint,
    hidden_states,
    is_text,
    length_sorted_batches,
    mean_pool,
    token_states,
)

__all__ = [
    "BertConfig", "EncoderLayer", "MiniLMEncoder", "bert_name", "run_layers", "TopLayers",
    "load_minilm", "is_text", "check_texts", "encode_batch", "length_sorted_batches", "mean_pool",
    "embed", "TokenStates", "fingerprint", "hidden_states", "token_states",
]
