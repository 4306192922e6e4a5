"""From the original Transformer-XL implementation's parameters to ours, name by name.

The authors' PyTorch code (kimiyoung/transformer-xl, `pytorch/mem_transformer.py`, the
relative "partial learnable" attention, attn_type 0) works *time-major* — activations are
(len, batch, d) — and names its weights as in the left column. This course is batch-first,
(B, len, D), and splits the fused projection. With H heads of size dh = D / H:

    original (post-norm, div_val=1, tied)        shape        ours (`TransformerXL(pre_norm=False)`)
    word_emb.emb_layers.0.weight                 (V, D)       embedding.weight
    crit.out_layers.0.weight                     (V, D)       (tied: the same tensor)
    crit.out_layers.0.bias                       (V,)         out_bias
    r_w_bias  (shared by all layers)             (H, dh)      layers.n.attention.u_bias   (every n)
    r_r_bias  (shared by all layers)             (H, dh)      layers.n.attention.v_bias   (every n)
    layers.n.dec_attn.r_w_bias / r_r_bias (untie_r=True: one per layer) -> the same two, per layer
    layers.n.dec_attn.qkv_net.weight             (3·H·dh, D)  rows [q; k; v] -> {q,k,v}_proj.weight
    layers.n.dec_attn.r_net.weight               (H·dh, D)    layers.n.attention.r_proj.weight
    layers.n.dec_attn.o_net.weight               (D, H·dh)    layers.n.attention.out_proj.weight
    layers.n.dec_attn.layer_norm.{weight,bias}   (D,)         layers.n.norm1.{weight,bias}
    layers.n.pos_ff.CoreNet.0.{weight,bias}      (d_ff, D)    layers.n.ff.0.{weight,bias}
    layers.n.pos_ff.CoreNet.3.{weight,bias}      (D, d_ff)    layers.n.ff.2.{weight,bias}
    layers.n.pos_ff.layer_norm.{weight,bias}     (D,)         layers.n.norm2.{weight,bias}
    pos_emb.inv_freq                             (D/2,)       (fixed: `reference.sinusoid_torch`)

Conventions that already agree: the position table is [sin | cos] with ω_k = 10000^(−2k/D)
(the original orders its rows by distance klen−1 … 0 for the relative shift; ours by 0 …, and
`fast.py` flips); embeddings are multiplied by √D; scores (a)+(b)+(c)+(d) are scaled by 1/√dh;
the causal mask lets query i see keys j <= M + i. Activations: ours = theirs.transpose(0, 1).
Not covered: adaptive embeddings/softmax (cutoffs, div_val > 1), d_head ≠ D / H, pre_lnorm.
"""

from __future__ import annotations

import re

import torch

from ..checks import fail, shape_str


def official_to_ours(state: dict, num_heads: int) -> dict:
    """Map an original-implementation state dict (see the table above) to `TransformerXL`'s.

    Returns a new dict for `TransformerXL(..., pre_norm=False).load_state_dict(...)`.
    """
    if "word_emb.emb_layers.0.weight" not in state:
        fail("not an original Transformer-XL state dict", "'word_emb.emb_layers.0.weight'",
             f"keys {sorted(state)[:4]}…")
    if any(k.startswith("word_emb.emb_projs") or k.startswith("crit.out_projs") for k in state):
        fail("adaptive embeddings are not supported", "div_val=1, d_embed = d_model",
             "emb_projs / out_projs in the state dict")
    embedding = state["word_emb.emb_layers.0.weight"]
    D = embedding.shape[1]
    dh = D // num_heads
    ours = {"embedding.weight": embedding, "out_bias": state["crit.out_layers.0.bias"]}
    layer_ids = sorted({int(m[1]) for k in state if (m := re.match(r"layers\.(\d+)\.", k))})
    rename = {"dec_attn.r_net.weight": "attention.r_proj.weight",
              "dec_attn.o_net.weight": "attention.out_proj.weight",
              "dec_attn.layer_norm.weight": "norm1.weight",
              "dec_attn.layer_norm.bias": "norm1.bias",
              "pos_ff.CoreNet.0.weight": "ff.0.weight", "pos_ff.CoreNet.0.bias": "ff.0.bias",
              "pos_ff.CoreNet.3.weight": "ff.2.weight", "pos_ff.CoreNet.3.bias": "ff.2.bias",
              "pos_ff.layer_norm.weight": "norm2.weight", "pos_ff.layer_norm.bias": "norm2.bias"}
    for n in layer_ids:
        theirs, mine = f"layers.{n}.", f"layers.{n}."
        qkv = state[theirs + "dec_attn.qkv_net.weight"]  # (3·H·dh, D), rows [q; k; v]
        if qkv.shape != (3 * D, D):
            fail("qkv_net has an unsupported shape (d_head must be D / H)", shape_str((3 * D, D)),
                 shape_str(qkv.shape))
        for name, w in zip("qkv", qkv.chunk(3, dim=0)):
            ours[mine + f"attention.{name}_proj.weight"] = w
        for old, new in rename.items():
            ours[mine + new] = state[theirs + old]
        for old, new in (("r_w_bias", "u_bias"), ("r_r_bias", "v_bias")):
            bias = state.get(theirs + "dec_attn." + old, state.get(old))  # untied, else shared
            if bias is None or tuple(bias.shape) != (num_heads, dh):
                fail(f"{old} missing or of the wrong shape", f"(H, dh) = ({num_heads}, {dh})",
                     "missing" if bias is None else shape_str(bias.shape))
            ours[mine + f"attention.{new}"] = bias
    return {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in ours.items()}
