"""A survey of wrong calls to the library's public functions, as a student would make them.

Each entry is one call that must be refused: the argument the message must name, and a
zero-argument function that makes the call. `classify` sorts what happened into

    clear    ValueError/TypeError in the library's format "<what>: expected <x>, got <y>"
             whose message names the argument
    unclear  ValueError/TypeError, but the framework's message (or ours without the argument)
    raw      any other exception (IndexError, RuntimeError, KeyError, ...)
    silent   no exception at all: a result came back (or no answer within 20 s: a hang)

`python tests/bad_calls.py` prints the counts per module and every call that is not clear;
tests/test_inputs.py requires every call to be clear. A test helper, not part of the library.
Its fixtures never call an exercise's code when the module is imported (only its lambdas do):
a student copy imports it with the exercises stubbed (tests/test_exercises.py checks).
"""

from __future__ import annotations

import math
import re
import signal
import sys
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from minattn import agreement as AG
from minattn import attention as A  # noqa: E402
from minattn import encoder as E
from minattn import ibm1
from minattn import lstm_attention as LA
from minattn import multiscale as MS
from minattn import sparse as S
from minattn import task_heads as TH
from minattn import xl as X
from minattn.course import agreement as AGC
from minattn.course import attention as CA  # noqa: E402
from minattn.course import encoder as CE
from minattn.course import lstm_attention as LAC
from minattn.course import multiscale as CM  # noqa: E402
from minattn.course import sparse as CS  # noqa: E402
from minattn.course import task_heads as CT
from minattn.course import train as TR  # noqa: E402
from minattn.course import xl as XC
from minattn.fast import attention as FA  # noqa: E402
from minattn.fast import ibm1 as ibm1_fast
from minattn.fast import multiscale as FM
from minattn.fast import sparse as FS
from minattn.fast import task_heads as FTH
from minattn.fast import xl as XF

OUR_FORMAT = re.compile(r".+: expected .+, got .+", re.S)


@dataclass
class Bad:
    module: str
    function: str
    arg: str  # the argument the message must name
    call: Callable[[], object]
    what: str  # what is wrong, in words


BAD: list[Bad] = []


def bad(module, function, arg, what):
    def register(call):
        BAD.append(Bad(module, function, arg, call, what))
        return call
    return register


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


def classify(entry: Bad, timeout: float = 20.0) -> tuple[str, str]:
    """(category, message) of one call; see the module docstring."""
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            entry.call()
    except Hang:
        return "silent", f"no answer within {timeout:.0f} s (a hang)"
    except (ValueError, TypeError) as err:
        text = str(err)
        if OUR_FORMAT.match(text) and entry.arg in text:
            return "clear", text
        return "unclear", f"{type(err).__name__}: {text}"
    except Exception as err:  # noqa: BLE001 - the survey sorts every kind
        return "raw", f"{type(err).__name__}: {err}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return "silent", "no error"


# ============================================================================ fixtures
rng = np.random.default_rng(0)


def R(*shape):
    return rng.standard_normal(shape)


def T(*shape, dtype=torch.float64):
    return torch.from_numpy(rng.standard_normal(shape)).to(dtype)


def with_value(x, value, index=(0,)):
    """A copy of x with `value` (nan, inf) at `index` (a prefix of indices: the first entry)."""
    y = x.clone() if isinstance(x, torch.Tensor) else np.array(x, copy=True)
    y[index] = value
    return y


META = torch.device("meta")  # a second device that every machine has
NAN, INF = float("nan"), float("inf")

q, k, v = R(2, 3, 4), R(2, 5, 4), R(2, 5, 6)
qt, kt, vt = (torch.from_numpy(a) for a in (q, k, v))
mask = np.ones((2, 3, 5), bool)
mask_t = torch.from_numpy(mask)
additive = np.where(np.tri(3, 5, 2, dtype=bool), 0.0, -np.inf)  # PyTorch's other convention
scores = R(2, 3, 5)
scores_t = torch.from_numpy(scores)

# ============================================================================ attention
bad("attention", "softmax_np", "mask", "additive float mask (0 / -inf)")(
    lambda: A.softmax_np(scores, additive))
bad("attention", "softmax_np", "mask", "0/1 float mask")(
    lambda: A.softmax_np(scores, np.ones((3, 5))))
bad("attention", "softmax_np", "scores", "+inf score")(
    lambda: A.softmax_np(with_value(scores, INF, (0, 0, 0))))
bad("attention", "softmax_np", "scores", "NaN score where the mask allows")(
    lambda: A.softmax_np(with_value(scores, NAN, (0, 0, 0)), mask))
bad("attention", "softmax_np", "mask", "mask that does not broadcast")(
    lambda: A.softmax_np(scores, np.ones((4, 5), bool)))
bad("attention", "softmax_np", "scores", "a torch tensor")(lambda: A.softmax_np(scores_t))
bad("attention", "softmax_np", "scores", "0-d scores")(lambda: A.softmax_np(np.float64(1.0)))
bad("attention", "softmax_torch", "mask", "additive float mask")(
    lambda: A.softmax_torch(scores_t, torch.from_numpy(additive)))
bad("attention", "softmax_torch", "scores", "+inf score")(
    lambda: A.softmax_torch(with_value(scores_t, INF, (0, 0, 0))))
bad("attention", "softmax_torch", "scores", "NaN score")(
    lambda: A.softmax_torch(with_value(scores_t, NAN, (0, 0, 0))))
bad("attention", "softmax_torch", "scores", "integer scores")(
    lambda: A.softmax_torch(torch.ones(3, 5, dtype=torch.long)))
bad("attention", "softmax_torch", "mask", "mask on another device")(
    lambda: A.softmax_torch(scores_t, mask_t.to(META)))
bad("attention", "softmax_torch", "mask", "mask that does not broadcast")(
    lambda: A.softmax_torch(scores_t, torch.ones(4, 5, dtype=torch.bool)))

bad("attention", "attention_np", "mask", "additive float mask")(
    lambda: A.attention_np(q, k, v, additive))
bad("attention", "attention_np", "k", "float32 q with float64 k")(
    lambda: A.attention_np(q.astype(np.float32), k, v))
bad("attention", "attention_np", "v", "NaN in a visible value")(
    lambda: A.attention_np(q, k, with_value(v, NAN, (0, 0, 0))))
bad("attention", "attention_np", "q", "+inf in a query")(
    lambda: A.attention_np(with_value(q, INF, (0, 0, 0)), k, v))
bad("attention", "attention_np", "q", "1-d q")(lambda: A.attention_np(q[0, 0], k, v))
bad("attention", "attention_np", "k", "feature sizes differ")(
    lambda: A.attention_np(q, R(2, 5, 3), v))
bad("attention", "attention_np", "v", "key counts differ")(lambda: A.attention_np(q, k, R(2, 4, 6)))
bad("attention", "attention_np", "scale", "NaN scale")(lambda: A.attention_np(q, k, v, scale=NAN))
bad("attention", "attention_np", "scale", "scale as a string")(
    lambda: A.attention_np(q, k, v, scale="0.5"))
bad("attention", "attention_np", "q", "integer queries")(
    lambda: A.attention_np(np.ones((3, 4), np.int64), k[0], v[0]))
bad("attention", "attention_np", "q", "a list")(lambda: A.attention_np(q.tolist(), k, v))
bad("attention", "softmax_rows_np", "rng", "a seed instead of a Generator")(
    lambda: CA.softmax_rows_np(4, 0))
bad("attention", "online_attention_np", "block", "block of 0 keys")(
    lambda: A.online_attention_np(q, k, v, block=0))
bad("attention", "online_attention_np", "mask", "additive float mask")(
    lambda: A.online_attention_np(q, k, v, additive))
bad("attention", "online_attention_np", "v", "NaN in a visible value")(
    lambda: A.online_attention_np(q, k, with_value(v, NAN, (0, 0, 0))))
bad("attention", "online_attention_torch", "block", "fractional block")(
    lambda: A.online_attention_torch(qt, kt, vt, block=2.5))
bad("attention", "online_attention_torch", "k", "k on another device")(
    lambda: A.online_attention_torch(qt, kt.to(META), vt))
bad("attention", "attention_torch", "k", "float32 q with float64 k")(
    lambda: A.attention_torch(qt.float(), kt, vt))
bad("attention", "attention_torch", "mask", "additive float mask")(
    lambda: A.attention_torch(qt, kt, vt, torch.from_numpy(additive)))
bad("attention", "attention_torch", "k", "k on another device")(
    lambda: A.attention_torch(qt, kt.to(META), vt))
bad("attention", "attention_torch", "v", "NaN in a visible value")(
    lambda: A.attention_torch(qt, kt, with_value(vt, NAN, (0, 0, 0))))
bad("attention", "attention_torch", "q", "integer tensors")(
    lambda: A.attention_torch(qt.long(), kt.long(), vt.long()))
bad("attention", "attention_torch", "q", "NumPy arrays (the twin takes tensors)")(
    lambda: A.attention_torch(q, k, v))
bad("attention", "attention_fast_torch", "q", "NumPy arrays")(
    lambda: FA.attention_fast_torch(q, k, v))
bad("attention", "attention_torch", "scale", "inf scale")(
    lambda: A.attention_torch(qt, kt, vt, scale=INF))
bad("attention", "attention_backward_np", "grad_out", "grad_out of the wrong shape")(
    lambda: A.attention_backward_np(R(2, 3, 5), q, k, v))
bad("attention", "attention_backward_np", "grad_out", "NaN in grad_out")(
    lambda: A.attention_backward_np(with_value(R(2, 3, 6), NAN, (0, 0, 0)), q, k, v))
bad("attention", "attention_backward_np", "mask", "additive float mask")(
    lambda: A.attention_backward_np(R(2, 3, 6), q, k, v, additive))

wq, wk, va = R(7, 4), R(7, 4), R(7)
bad("attention", "additive_scores_np", "w_q", "w_q of the wrong width")(
    lambda: A.additive_scores_np(q, k, R(7, 3), wk, va))
bad("attention", "additive_scores_np", "v_a", "NaN in v_a")(
    lambda: A.additive_scores_np(q, k, wq, wk, with_value(va, NAN)))
bad("attention", "additive_scores_np", "q", "1-d q")(
    lambda: A.additive_scores_np(q[0, 0], k, wq, wk, va))
bad("attention", "additive_scores_torch", "w_k", "float32 w_k with float64 q")(
    lambda: A.additive_scores_torch(qt, kt, torch.from_numpy(wq), torch.from_numpy(wk).float(),
                                    torch.from_numpy(va)))
bad("attention", "additive_scores_torch", "v_a", "v_a on another device")(
    lambda: A.additive_scores_torch(qt, kt, torch.from_numpy(wq), torch.from_numpy(wk),
                                    torch.from_numpy(va).to(META)))

x3 = R(2, 5, 8)
x3t = torch.from_numpy(x3)
bad("attention", "split_heads_np", "num_heads", "heads that do not divide D")(
    lambda: A.split_heads_np(x3, 3))
bad("attention", "split_heads_np", "num_heads", "0 heads")(lambda: A.split_heads_np(x3, 0))
bad("attention", "split_heads_np", "num_heads", "2.0 heads")(lambda: A.split_heads_np(x3, 2.0))
bad("attention", "split_heads_np", "x", "2-d x")(lambda: A.split_heads_np(x3[0], 2))
bad("attention", "merge_heads_np", "x", "3-d x")(lambda: A.merge_heads_np(x3))
bad("attention", "split_heads_torch", "num_heads", "heads that do not divide D")(
    lambda: A.split_heads_torch(x3t, 3))
bad("attention", "split_heads_torch", "num_heads", "-2 heads")(lambda: A.split_heads_torch(x3t, -2))
bad("attention", "merge_heads_torch", "x", "3-d x")(lambda: A.merge_heads_torch(x3t))

torch.manual_seed(0)
mha = A.MultiHeadAttention(8, 2).double()
params = mha.numpy_params()
xb = R(4, 4, 8)  # B == Lq == 4: a (B, Lk) padding mask looks like an (Lq, Lk) mask
xbt = torch.from_numpy(xb)
kp = np.ones((4, 4), bool)
kp[0, 2:] = False
bad("attention", "MultiHeadAttention.forward", "mask", "(B, Lk) padding mask with B == Lq")(
    lambda: mha(xbt, mask=torch.from_numpy(kp)))
bad("attention", "MultiHeadAttention.forward", "value", "a value of another length, no key")(
    lambda: A.MultiHeadAttention(8, 2)(torch.randn(2, 3, 8), value=torch.randn(2, 4, 8)))
bad("attention", "MultiHeadAttention.forward", "key_padding_mask", "Lk of no key")(
    lambda: A.MultiHeadAttention(8, 2)(torch.randn(2, 3, 8),
                                       key_padding_mask=torch.ones(2, 4, dtype=torch.bool)))
bad("attention", "MultiHeadAttention.forward", "mask", "additive float mask")(
    lambda: mha(xbt, mask=torch.from_numpy(np.where(kp, 0.0, -np.inf))))
bad("attention", "MultiHeadAttention.forward", "query", "float32 input to a float64 module")(
    lambda: mha(xbt.float()))
bad("attention", "MultiHeadAttention.forward", "query", "NaN in the input")(
    lambda: mha(with_value(xbt, NAN, (0, 0, 0))))
bad("attention", "MultiHeadAttention.forward", "key", "key on another device")(
    lambda: mha(xbt, xbt.to(META)))
bad("attention", "MultiHeadAttention.forward", "query", "wrong model width")(
    lambda: mha(torch.zeros(2, 3, 6, dtype=torch.float64)))
bad("attention", "MultiHeadAttention.forward", "mask", "3-d mask (B, Lq, Lk) or (H, Lq, Lk)?")(
    lambda: mha(torch.zeros(2, 3, 8, dtype=torch.float64),
                mask=torch.ones(2, 3, 3, dtype=torch.bool)))
bad("attention", "MultiHeadAttention", "d_model", "negative d_model")(
    lambda: A.MultiHeadAttention(-4, 2))
bad("attention", "MultiHeadAttention", "d_model", "d_model 8.0")(
    lambda: A.MultiHeadAttention(8.0, 2))
bad("attention", "MultiHeadAttention.load_from_torch", "mha", "not an nn.MultiheadAttention")(
    lambda: A.MultiHeadAttention(8, 2).load_from_torch(torch.nn.Linear(8, 8)))
bad("attention", "multi_head_attention_np", "mask", "(B, Lk) padding mask with B == Lq")(
    lambda: A.multi_head_attention_np(xb, xb, xb, params, 2, kp))
bad("attention", "multi_head_attention_np", "params", "a missing weight")(
    lambda: A.multi_head_attention_np(xb, xb, xb,
                                      {k_: v_ for k_, v_ in params.items() if k_ != "w_o"}, 2))
bad("attention", "multi_head_attention_np", "num_heads", "heads that do not divide D")(
    lambda: A.multi_head_attention_np(xb, xb, xb, params, 3))
bad("attention", "multi_head_attention_np", "query", "NaN in the query")(
    lambda: A.multi_head_attention_np(with_value(xb, NAN, (0, 0, 0)), xb, xb, params, 2))
bad("attention", "attention_fast_torch", "k", "float32 q with float64 k")(
    lambda: FA.attention_fast_torch(qt.float(), kt, vt))
bad("attention", "attention_fast_torch", "mask", "additive float mask")(
    lambda: FA.attention_fast_torch(qt, kt, vt, torch.from_numpy(additive)))
bad("attention", "attention_fast_torch", "v", "NaN in a visible value")(
    lambda: FA.attention_fast_torch(qt, kt, with_value(vt, NAN, (0, 0, 0))))
bad("attention", "attention_fast_torch", "is_causal", "is_causal and a mask")(
    lambda: FA.attention_fast_torch(qt, kt, vt, mask_t, is_causal=True))
bad("attention", "causal_mask_np", "n_queries", "negative size")(lambda: A.causal_mask_np(-1))
bad("attention", "causal_mask_np", "n_queries", "size 2.5")(lambda: A.causal_mask_np(2.5))
bad("attention", "causal_mask_np", "n_keys", "negative n_keys")(lambda: A.causal_mask_np(3, -2))
bad("attention", "causal_mask_torch", "n_queries", "negative size")(lambda: A.causal_mask_torch(-1))
bad("attention", "causal_mask_torch", "n_keys", "size 2.5")(lambda: A.causal_mask_torch(2, 2.5))
bad("attention", "padding_mask_np", "lengths", "a negative length")(
    lambda: A.padding_mask_np(np.array([3, -1]), 4))
bad("attention", "padding_mask_np", "lengths", "a length longer than max_len")(
    lambda: A.padding_mask_np(np.array([3, 9]), 4))
bad("attention", "padding_mask_np", "lengths", "fractional lengths")(
    lambda: A.padding_mask_np(np.array([2.5, 1.0]), 4))
bad("attention", "padding_mask_np", "max_len", "negative max_len")(
    lambda: A.padding_mask_np(np.array([0, 0]), -1))
bad("attention", "padding_mask_torch", "lengths", "a length longer than max_len")(
    lambda: A.padding_mask_torch(torch.tensor([3, 9]), 4))
bad("attention", "padding_mask_torch", "lengths", "float lengths")(
    lambda: A.padding_mask_torch(torch.tensor([2.5, 1.0]), 4))
bad("attention", "padding_mask_torch", "lengths", "2-d lengths")(
    lambda: A.padding_mask_torch(torch.tensor([[2, 1]]), 4))

# ============================================================================ xl
H, dh = 2, 4
qx, kx, vx = R(1, H, 3, dh), R(1, H, 5, dh), R(1, H, 5, dh)
rx, ub, vb = R(H, 5, dh), R(H, dh), R(H, dh)
qxt, kxt, vxt, rxt, ubt, vbt = (torch.from_numpy(a) for a in (qx, kx, vx, rx, ub, vb))
bad("xl", "relative_distances_np", "n_queries", "negative size")(
    lambda: X.relative_distances_np(-2, 3))
bad("xl", "relative_distances_np", "n_keys", "size 2.5")(lambda: X.relative_distances_np(2, 2.5))
bad("xl", "relative_distances_torch", "n_queries", "negative size")(
    lambda: X.relative_distances_torch(-2, 3))
bad("xl", "sinusoid_np", "n_positions", "size 2.5")(lambda: X.sinusoid_np(2.5, 4))
bad("xl", "sinusoid_np", "d_model", "negative d_model")(lambda: X.sinusoid_np(3, -4))
bad("xl", "sinusoid_torch", "n_positions", "size 2.5")(lambda: X.sinusoid_torch(2.5, 4))
bad("xl", "sinusoid_torch", "dtype", "an integer dtype")(
    lambda: X.sinusoid_torch(3, 4, dtype=torch.long))
bad("xl", "update_memory_np", "mem_len", "mem_len = -1")(
    lambda: X.update_memory_np(R(2, 3, 4), R(2, 2, 4), -1))
bad("xl", "update_memory_np", "mem_len", "mem_len = 2.5")(
    lambda: X.update_memory_np(R(2, 3, 4), R(2, 2, 4), 2.5))
bad("xl", "update_memory_np", "memory", "memory of another batch")(
    lambda: X.update_memory_np(R(3, 3, 4), R(2, 2, 4), 3))
bad("xl", "update_memory_np", "memory", "memory of another width")(
    lambda: X.update_memory_np(R(2, 3, 5), R(2, 2, 4), 3))
bad("xl", "update_memory_torch", "mem_len", "mem_len = -1")(
    lambda: X.update_memory_torch(T(2, 3, 4), T(2, 2, 4), -1))
bad("xl", "update_memory_torch", "memory", "memory on another device")(
    lambda: X.update_memory_torch(T(2, 3, 4).to(META), T(2, 2, 4), 3))
bad("xl", "update_memory_torch", "hidden", "2-d hidden")(
    lambda: X.update_memory_torch(None, T(2, 4), 3))
bad("xl", "rel_attention_np", "q", "NaN in q")(
    lambda: X.rel_attention_np(with_value(qx, NAN, (0, 0, 0, 0)), kx, vx, rx, ub, vb))
bad("xl", "rel_attention_np", "r", "r too short")(
    lambda: X.rel_attention_np(qx, kx, vx, rx[:, :3], ub, vb))
bad("xl", "rel_attention_np", "k", "float32 k")(
    lambda: X.rel_attention_np(qx, kx.astype(np.float32), vx, rx, ub, vb))
bad("xl", "rel_attention_torch", "k", "float32 k with float64 q")(
    lambda: X.rel_attention_torch(qxt, kxt.float(), vxt, rxt, ubt, vbt))
bad("xl", "rel_attention_torch", "u_bias", "u_bias on another device")(
    lambda: X.rel_attention_torch(qxt, kxt, vxt, rxt, ubt.to(META), vbt))
bad("xl", "rel_attention_torch", "v", "NaN in v")(
    lambda: X.rel_attention_torch(qxt, kxt, with_value(vxt, NAN, (0, 0, 0, 0)), rxt, ubt, vbt))
bad("xl", "rel_attention_fast_torch", "k", "float32 k with float64 q")(
    lambda: XF.rel_attention_fast_torch(qxt, kxt.float(), vxt, rxt, ubt, vbt))
bad("xl", "rel_attention_fast_torch", "q", "+inf in q")(
    lambda: XF.rel_attention_fast_torch(with_value(qxt, INF, (0, 0, 0, 0)), kxt, vxt, rxt, ubt,
                                        vbt))
bad("xl", "rel_shift_np", "scores", "1-d scores")(lambda: XF.rel_shift_np(R(5)))
bad("xl", "rel_attention_fast_np", "k", "float32 k")(
    lambda: XF.rel_attention_fast_np(qx, kx.astype(np.float32), vx, rx, ub, vb))
bad("xl", "rel_attention_fast_np", "q", "a torch q")(
    lambda: XF.rel_attention_fast_np(qxt, kx, vx, rx, ub, vb))
bad("xl", "rel_shift_torch", "scores", "1-d scores")(lambda: XF.rel_shift_torch(T(5)))

torch.manual_seed(0)
relmha = X.RelMultiHeadAttention(8, 2).double()
rparams = relmha.numpy_params()
bad("xl", "rel_multi_head_attention_np", "params", "a missing weight")(
    lambda: X.rel_multi_head_attention_np(R(1, 3, 8), None,
                                          {k_: v_ for k_, v_ in rparams.items() if k_ != "w_r"}, 2))
bad("xl", "rel_multi_head_attention_np", "x", "NaN in x")(
    lambda: X.rel_multi_head_attention_np(with_value(R(1, 3, 8), NAN, (0, 0, 0)), None, rparams, 2))
bad("xl", "rel_multi_head_attention_np", "num_heads", "0 heads")(
    lambda: X.rel_multi_head_attention_np(R(1, 3, 8), None, rparams, 0))
bad("xl", "RelMultiHeadAttention.forward", "x", "float32 x into a float64 module")(
    lambda: relmha(T(1, 3, 8, dtype=torch.float32)))
bad("xl", "RelMultiHeadAttention.forward", "memory", "memory of another dtype")(
    lambda: relmha(T(1, 3, 8), T(1, 2, 8, dtype=torch.float32)))
bad("xl", "RelMultiHeadAttention", "max_len", "max_len = 0")(
    lambda: X.RelMultiHeadAttention(8, 2, 0))
bad("xl", "RelMultiHeadAttention", "attend", "a kernel given by name")(
    lambda: X.RelMultiHeadAttention(8, 2, attend="fast"))
bad("xl", "official_to_ours", "num_heads", "0 heads")(
    lambda: X.official_to_ours({"word_emb.emb_layers.0.weight": T(5, 8)}, 0))
torch.manual_seed(0)
xlm = X.TransformerXL(11, 8, 2, 1, mem_len=4).double()
bad("xl", "TransformerXL.forward", "tokens", "a token id >= vocab")(
    lambda: xlm(torch.tensor([[1, 2, 11]])))
bad("xl", "TransformerXL.forward", "tokens", "a negative token id")(
    lambda: xlm(torch.tensor([[1, -1, 3]])))
bad("xl", "TransformerXL.forward", "tokens", "float tokens")(
    lambda: xlm(torch.tensor([[1.0, 2.0]])))
bad("xl", "TransformerXL.forward", "mem_len", "mem_len = -1")(
    lambda: xlm(torch.tensor([[1, 2]]), None, -1))
bad("xl", "TransformerXL.forward", "memories", "a memory of another batch")(
    lambda: xlm(torch.tensor([[1, 2]]), [T(2, 3, 8)]))
bad("xl", "TransformerXL", "vocab_size", "vocab_size = 0")(lambda: X.TransformerXL(0, 8, 2, 1))
bad("xl", "TransformerXL", "mem_len", "mem_len = -3")(
    lambda: X.TransformerXL(5, 8, 2, 1, mem_len=-3))
bad("xl", "TransformerXL", "num_layers", "num_layers = 0")(lambda: X.TransformerXL(5, 8, 2, 0))

# ============================================================================ multiscale
qm, km, vm = R(1, 2, 6, 4), R(1, 2, 6, 4), R(1, 2, 6, 4)
qmt, kmt, vmt = (torch.from_numpy(a) for a in (qm, km, vm))
raw = np.abs(R(1, 2, 6, 6))  # weights whose rows sum to 1, made without exercise code: a
wts = raw / raw.sum(-1, keepdims=True)  # student copy imports this module (test_inputs)
bad("multiscale", "measured_scale_np", "query_mask", "float query mask")(
    lambda: MS.measured_scale_np(wts, np.full((1, 6), 0.5)))
bad("multiscale", "measured_scale_np", "query_mask", "(N,) query mask")(
    lambda: MS.measured_scale_np(wts, np.ones(6, bool)))
bad("multiscale", "measured_scale_np", "weights", "NaN in the weights of a real query")(
    lambda: MS.measured_scale_np(with_value(wts, NAN, (0, 0, 0, 0))))
bad("multiscale", "measured_scale_np", "weights", "negative weights")(
    lambda: MS.measured_scale_np(-wts))
bad("multiscale", "measured_scale_torch", "query_mask", "float query mask")(
    lambda: MS.measured_scale_torch(torch.from_numpy(wts), torch.full((1, 6), 0.5)))
bad("multiscale", "measured_scale_torch", "query_mask", "(N,) query mask")(
    lambda: MS.measured_scale_torch(torch.from_numpy(wts), torch.ones(6, dtype=torch.bool)))
bad("multiscale", "scale_mask_np", "n", "n = 2.5")(lambda: MS.scale_mask_np(2.5, [1, 2]))
bad("multiscale", "scale_mask_np", "windows", "a 2-d array of windows")(
    lambda: MS.scale_mask_np(3, np.array([[0, 1], [1, 2]])))
bad("multiscale", "scale_mask_np", "windows", "a negative window")(
    lambda: MS.scale_mask_np(4, [1, -2]))
bad("multiscale", "scale_mask_torch", "windows", "a window 1.5")(
    lambda: MS.scale_mask_torch(4, [1.5]))
bad("multiscale", "scale_candidates", "n", "n = 1")(lambda: MS.scale_candidates(1))
bad("multiscale", "scale_candidates", "n", "n = 16.0")(lambda: MS.scale_candidates(16.0))
bad("multiscale", "multiscale_attention_np", "windows", "one window for two heads")(
    lambda: MS.multiscale_attention_np(qm, km, vm, [1]))
bad("multiscale", "multiscale_attention_np", "mask", "float mask")(
    lambda: MS.multiscale_attention_np(qm, km, vm, [1, 2], np.ones((1, 1, 1, 6))))
bad("multiscale", "multiscale_attention_np", "v", "NaN in a visible value")(
    lambda: MS.multiscale_attention_np(qm, km, with_value(vm, NAN, (0, 0, 0, 0)), [1, 2]))
bad("multiscale", "multiscale_attention_torch", "k", "float32 k")(
    lambda: MS.multiscale_attention_torch(qmt, kmt.float(), vmt, [1, 2]))
bad("multiscale", "multiscale_attention_fast_torch", "k", "float32 k")(
    lambda: FM.multiscale_attention_fast_torch(qmt, kmt.float(), vmt, [1, 2]))
bad("multiscale", "multiscale_attention_fast_torch", "dense_below", "dense_below = -1")(
    lambda: FM.multiscale_attention_fast_torch(qmt, kmt, vmt, [1, 2], dense_below=-1))
bad("multiscale", "allocate_scales_np", "alpha", "alpha as a string")(
    lambda: MS.allocate_scales_np(4, 2, 2, "0.5"))
bad("multiscale", "allocate_scales_np", "num_heads", "num_heads = 0")(
    lambda: MS.allocate_scales_np(0, 2, 2, 0.5))
bad("multiscale", "layer_windows", "counts", "negative counts")(
    lambda: MS.layer_windows(np.array([[2, -1]]), [1, 3]))
bad("multiscale", "layer_windows", "counts", "fractional counts")(
    lambda: MS.layer_windows(np.array([[1.5, 0.5]]), [1, 3]))
bad("multiscale", "masked_max_torch", "keep", "float keep mask")(
    lambda: MS.masked_max_torch(T(2, 3, 4), torch.ones(2, 3)))
bad("multiscale", "masked_max_torch", "keep", "keep of the wrong shape")(
    lambda: MS.masked_max_torch(T(2, 3, 4), torch.ones(3, 2, dtype=torch.bool)))
bad("multiscale", "MultiScaleKernel", "windows", "negative window")(
    lambda: MS.MultiScaleKernel([-1]))
bad("multiscale", "band_attention_fast_torch", "w", "w = 0")(
    lambda: FM.band_attention_fast_torch(qmt, kmt, vmt, 0))
bad("multiscale", "band_attention_fast_torch", "chunk", "chunk > 2w")(
    lambda: FM.band_attention_fast_torch(qmt, kmt, vmt, 2, chunk=5))
bad("multiscale", "band_attention_fast_torch", "q", "tensors off the CPU")(
    lambda: FM.band_attention_fast_torch(qmt.to("meta"), kmt.to("meta"), vmt.to("meta"), 2))
bad("multiscale", "multiscale_attention_routed_fast_torch", "windows", "a negative window")(
    lambda: FM.multiscale_attention_routed_fast_torch(qmt, kmt, vmt, [1, -2]))
bad("multiscale", "multiscale_attention_torch", "n_global", "n_global > N")(
    lambda: MS.multiscale_attention_torch(qmt, kmt, vmt, [1, 2], n_global=7))
bad("multiscale", "MultiScaleKernel", "kernel", "a kernel that is not a function")(
    lambda: MS.MultiScaleKernel([1, 2], kernel="fast"))
bad("multiscale", "ScaleAllocation", "counts", "counts over 3 scales")(
    lambda: MS.ScaleAllocation([[1, 1, 1]]))
bad("multiscale", "band_pieces", "c", "c = 0")(lambda: FM.band_pieces(8, 2, 0))
bad("multiscale", "band_pieces_np", "w", "w = -1")(lambda: FM.band_pieces_np(8, -1, 2))
torch.manual_seed(0)
mst = MS.MultiScaleTransformer(4, 8, [[1, 3]], 2, embedding=torch.nn.Embedding(7, 4)).double()
bad("multiscale", "MultiScaleTransformer.forward", "inputs", "a token id >= vocab")(
    lambda: mst(torch.tensor([[1, 7, 2]])))
bad("multiscale", "MultiScaleTransformer.forward", "lengths", "a length longer than N")(
    lambda: mst(torch.tensor([[1, 2, 3]]), torch.tensor([5])))
bad("multiscale", "MultiScaleTransformer.forward", "lengths", "a length of 0")(
    lambda: mst(torch.tensor([[1, 2, 3]]), torch.tensor([0])))
bad("multiscale", "MultiScaleTransformer", "windows", "layers with different head counts")(
    lambda: MS.MultiScaleTransformer(4, 8, [[1, 3], [1]], 2))
bad("multiscale", "MultiScaleTransformer.measured_scales", "lengths", "a length longer than N")(
    lambda: mst.measured_scales(torch.tensor([[1, 2, 3]]), torch.tensor([5])))

# ============================================================================ sparse
bad("sparse", "sliding_window_mask_np", "n", "n = 2.5")(lambda: S.sliding_window_mask_np(2.5, 1))
bad("sparse", "sliding_window_mask_np", "w", "w = -1")(lambda: S.sliding_window_mask_np(5, -1))
bad("sparse", "dilated_window_mask_np", "dilation", "dilation = 0")(
    lambda: S.dilated_window_mask_np(5, 1, 0))
bad("sparse", "global_mask_np", "global_idx", "index past N")(lambda: S.global_mask_np(5, [7]))
bad("sparse", "global_mask_np", "global_idx", "fractional index")(
    lambda: S.global_mask_np(5, [1.5]))
bad("sparse", "random_mask_np", "r", "r = -1")(lambda: S.random_mask_np(5, -1, 0))
bad("sparse", "random_mask_np", "seed", "seed = 'a'")(lambda: S.random_mask_np(5, 1, "a"))
bad("sparse", "block_mask_np", "layout", "int layout")(
    lambda: S.block_mask_np(np.ones((2, 2), int), 2, 4))
bad("sparse", "block_mask_np", "n", "n = -1")(lambda: S.block_mask_np(np.ones((1, 1), bool), 2, -1))
bad("sparse", "block_layout_np", "mask", "float mask")(
    lambda: S.block_layout_np(np.ones((4, 4)), 2))
bad("sparse", "block_layout_np", "mask", "non-square mask")(
    lambda: S.block_layout_np(np.ones((4, 3), bool), 2))
bad("sparse", "bigbird_layout_np", "n_blocks", "n_blocks = 0")(lambda: S.bigbird_layout_np(0))
bad("sparse", "bigbird_mask_np", "window", "window = -1")(lambda: S.bigbird_mask_np(8, 2, -1))
bad("sparse", "strided_masks_np", "stride", "stride = 0")(lambda: S.strided_masks_np(8, 0))
bad("sparse", "fixed_masks_np", "summary", "summary > block")(lambda: S.fixed_masks_np(8, 2, 3))
bad("sparse", "union_np", "masks", "float masks")(
    lambda: S.union_np(np.ones((3, 3)), np.zeros((3, 3))))
bad("sparse", "union_np", "masks", "masks of different shapes")(
    lambda: S.union_np(np.ones((3, 3), bool), np.ones((4, 4), bool)))
bad("sparse", "hops_np", "max_hops", "max_hops = -1")(lambda: S.hops_np(np.eye(3, dtype=bool), -1))
bad("sparse", "hops_np", "mask", "float mask")(lambda: S.hops_np(np.eye(3)))
bad("sparse", "diameter_np", "mask", "non-square mask")(
    lambda: S.diameter_np(np.ones((3, 4), bool)))
qs, ks, vs = T(1, 9, 4), T(1, 9, 4), T(1, 9, 4)
bad("sparse", "sliding_window_attention_fast_torch", "w", "w = -1")(
    lambda: FS.sliding_window_attention_fast_torch(qs, ks, vs, -1))
bad("sparse", "sliding_window_attention_fast_torch", "k", "float32 k")(
    lambda: FS.sliding_window_attention_fast_torch(qs, ks.float(), vs, 2))
bad("sparse", "sliding_window_attention_fast_torch", "v", "NaN in v")(
    lambda: FS.sliding_window_attention_fast_torch(qs, ks, with_value(vs, NAN, (0, 0, 0)), 2))
bad("sparse", "sliding_window_attention_fast_torch", "chunk_scores", "chunk_scores = 0")(
    lambda: FS.sliding_window_attention_fast_torch(qs.requires_grad_(), ks, vs, 2, chunk_scores=0))
bad("sparse", "dilated_window_attention_fast_torch", "dilation", "dilation = 0")(
    lambda: FS.dilated_window_attention_fast_torch(qs, ks, vs, 1, 0))
bad("sparse", "global_window_attention_fast_torch", "global_idx", "index past N")(
    lambda: FS.global_window_attention_fast_torch(qs, ks, vs, 1, [12]))
bad("sparse", "window_attention_fast_torch", "k", "k on another device")(
    lambda: FS.window_attention_fast_torch(qs, ks.to(META), vs, 1))
bad("sparse", "window_attention_fast_torch", "block", "block = 0")(
    lambda: FS.window_attention_fast_torch(qs, ks, vs, 1, block=0))
bad("sparse", "window_attention_np", "w", "w = 1.5")(
    lambda: S.window_attention_np(R(1, 9, 4), R(1, 9, 4), R(1, 9, 4), 1.5))
bad("sparse", "window_attention_np", "q", "a tensor q")(
    lambda: S.window_attention_np(qs, R(1, 9, 4), R(1, 9, 4), 1))
bad("sparse", "window_attention_torch", "k", "k on another device")(
    lambda: S.window_attention_torch(qs, ks.to(META), vs, 1))
bad("sparse", "window_attention_torch", "global_idx", "index past N")(
    lambda: S.window_attention_torch(qs, ks, vs, 1, global_idx=[9]))
bad("sparse", "window_attention_torch", "k", "k of another length")(
    lambda: S.window_attention_torch(qs, ks[:, :5], vs[:, :5], 1))
bad("sparse", "longformer_mask_np", "dilation", "dilation = 0")(
    lambda: S.longformer_mask_np(8, 1, 0))
bad("sparse", "blocked_window_attention_torch", "block", "block = 0")(
    lambda: FS.blocked_window_attention_torch(qs, ks, vs, 1, 1, 0))
bad("sparse", "blocked_window_attention_torch", "w_left", "w_left = -1")(
    lambda: FS.blocked_window_attention_torch(qs, ks, vs, -1, 1, 4))
bad("sparse", "band_mask_torch", "block", "block = -2")(lambda: FS.band_mask_torch(-2, 1, 1))
bad("sparse", "unfold_blocks_torch", "block", "block = 0")(
    lambda: FS.unfold_blocks_torch(qs, 0, 1, 1))
bad("sparse", "window_forward_torch", "w", "w = -1")(
    lambda: FS.window_forward_torch(qs, ks, vs, -1, False, 4, None))
bad("sparse", "block_sparse_attention_np", "layout", "layout of the wrong size")(
    lambda: S.block_sparse_attention_np(R(1, 9, 4), R(1, 9, 4), R(1, 9, 4),
                                        np.ones((2, 2), bool), 3))
bad("sparse", "block_sparse_attention_fast_torch", "v", "NaN in v")(
    lambda: FS.block_sparse_attention_fast_torch(qs, ks, with_value(vs, NAN, (0, 0, 0)),
                                                 np.ones((3, 3), bool), 3))
bad("sparse", "block_sparse_attention_torch", "layout", "int layout")(
    lambda: S.block_sparse_attention_torch(qs, ks, vs, np.ones((3, 3), int), 3))
bad("sparse", "block_sparse_attention_torch", "v", "NaN in v")(
    lambda: S.block_sparse_attention_torch(qs, ks, with_value(vs, NAN, (0, 0, 0)),
                                            np.ones((3, 3), bool), 3))
bad("sparse", "window_attention_backward_torch", "grad_out", "grad_out of the wrong shape")(
    lambda: FS.window_attention_backward_torch(qs, ks, vs, T(1, 8, 4), 1, 1, 4, None))
bad("sparse", "diameter_fast_np", "mask", "float mask")(lambda: FS.diameter_fast_np(np.eye(3)))
bad("sparse", "window_attend", "w", "w = -1")(lambda: S.window_attend(-1))
bad("sparse", "window_attend", "kernel", "a kernel that is not a function")(
    lambda: S.window_attend(1, kernel="fast"))
bad("sparse", "block_sparse_attend", "layout", "int layout")(
    lambda: S.block_sparse_attend(np.ones((2, 2), int), 2))
torch.manual_seed(0)
spc = S.SparseClassifier(5, 8, 8, 2, 1, S.window_attend(1)).double()
bad("sparse", "SparseClassifier.forward", "tokens", "sequence longer than max_len")(
    lambda: spc(torch.zeros(1, 9, dtype=torch.long)))
bad("sparse", "SparseClassifier.forward", "tokens", "token id >= vocab")(
    lambda: spc(torch.tensor([[1, 5]])))

# ============================================================================ task heads
st_, sm_ = R(2, 4, 6), np.array([[1, 1, 0, 0], [1, 1, 1, 1]], bool)
stt, smt = torch.from_numpy(st_), torch.from_numpy(sm_)
garbage = with_value(st_, NAN, (0, 3, 0))  # NaN in a padded position
bad("task_heads", "mean_pool_np", "mask", "float mask")(
    lambda: TH.mean_pool_np(st_, sm_.astype(float)))
bad("task_heads", "mean_pool_np", "states", "NaN in a real token")(
    lambda: TH.mean_pool_np(with_value(st_, NAN, (0, 1, 0)), sm_))
bad("task_heads", "mean_pool_torch", "states", "integer states")(
    lambda: TH.mean_pool_torch(stt.long(), smt))
bad("task_heads", "mean_pool_torch", "mask", "mask on another device")(
    lambda: TH.mean_pool_torch(stt, smt.to(META)))
bad("task_heads", "cls_pool_np", "states", "NaN in the first token")(
    lambda: TH.cls_pool_np(with_value(st_, NAN, (0, 0, 0)), sm_))
bad("task_heads", "cls_pool_torch", "mask", "float mask")(
    lambda: TH.cls_pool_torch(stt, smt.double()))
bad("task_heads", "layer_norm_np", "eps", "negative eps")(lambda: TH.layer_norm_np(st_, -1.0))
bad("task_heads", "layer_norm_np", "x", "NaN in x")(
    lambda: TH.layer_norm_np(with_value(st_, NAN, (0, 0, 0))))
bad("task_heads", "layer_norm_torch", "x", "integer x")(lambda: TH.layer_norm_torch(stt.long()))
bad("task_heads", "pearson_loss_np", "pred", "NaN in pred")(
    lambda: TH.pearson_loss_np(with_value(R(5), NAN), R(5)))
bad("task_heads", "pearson_loss_np", "eps", "negative eps")(
    lambda: TH.pearson_loss_np(R(5), R(5), -1.0))
bad("task_heads", "pearson_loss_torch", "target", "float32 target with float64 pred")(
    lambda: TH.pearson_loss_torch(T(5), T(5, dtype=torch.float32)))
bad("task_heads", "pearson_loss_torch", "pred", "pred of length 1")(
    lambda: TH.pearson_loss_torch(T(1), T(1)))
torch.manual_seed(0)
apool = TH.AttentionPool(6, 2).double()
cpool = TH.CrossAttentionPool(6, 2).double()
bad("task_heads", "attention_pool_np", "layers", "no layers")(
    lambda: TH.attention_pool_np(st_, sm_, [], 2))
bad("task_heads", "attention_pool_np", "num_heads", "heads that do not divide D")(
    lambda: TH.attention_pool_np(st_, sm_, apool.numpy_params(), 4))
bad("task_heads", "attention_pool_np", "states", "NaN in a real token")(
    lambda: TH.attention_pool_np(with_value(st_, NAN, (0, 1, 0)), sm_, apool.numpy_params(), 2))
bad("task_heads", "cross_attention_pool_np", "b_mask", "float b_mask")(
    lambda: TH.cross_attention_pool_np(st_, sm_, st_, sm_.astype(float), cpool.numpy_params(), 2))
bad("task_heads", "AttentionPool.forward", "states", "float32 states into a float64 head")(
    lambda: apool(stt.float(), smt))
bad("task_heads", "AttentionPool.forward", "mask", "mask with padding before a real token")(
    lambda: apool(stt, torch.tensor([[1, 0, 1, 0], [1, 1, 1, 1]], dtype=torch.bool)))
bad("task_heads", "CrossAttentionPool.forward", "b", "b on another device")(
    lambda: cpool(stt, smt, stt.to(META), smt))
bad("task_heads", "AttentionPool", "num_layers", "num_layers = 1.5")(
    lambda: TH.AttentionPool(6, 2, 1.5))
bad("task_heads", "attention_layers", "num_layers", "num_layers = 0")(
    lambda: TH.attention_layers("x", 6, 2, 0, "default"))
bad("task_heads", "attention_entropy_ratio", "mask", "mask of another shape")(
    lambda: CT.attention_entropy_ratio(torch.full((2, 2, 4), 0.25),
                                       torch.ones(3, 4, dtype=torch.bool)))
bad("task_heads", "attention_entropy_ratio", "weights", "negative weights")(
    lambda: CT.attention_entropy_ratio(torch.full((2, 2, 4), -0.25),
                                       torch.ones(2, 4, dtype=torch.bool)))
bad("task_heads", "u09_init_", "mha", "not a MultiHeadAttention")(
    lambda: TH.u09_init_(torch.nn.Linear(3, 3)))
bad("task_heads", "pair_features_torch", "u", "NumPy u")(
    lambda: TH.pair_features_torch(st_[:, 0], stt[:, 0]))
bad("task_heads", "attention_pool_fast_torch", "states", "width that does not match the layer")(
    lambda: FTH.attention_pool_fast_torch(
        T(2, 4, 8), smt, apool.layers[0]))
bad("task_heads", "attention_pool_fast_torch", "mha", "not a MultiHeadAttention")(
    lambda: FTH.attention_pool_fast_torch(stt, smt, torch.nn.Linear(6, 6)))
bad("task_heads", "cross_attention_pool_np", "read", "an unknown read-out")(
    lambda: TH.cross_attention_pool_np(st_, sm_, st_, sm_, cpool.numpy_params(), 2, "max"))
bad("task_heads", "Standardize", "tokens", "one token only")(
    lambda: TH.Standardize(torch.zeros(1, 6)))
bad("task_heads", "drop_token", "index", "dropping the first token")(
    lambda: CT.drop_token(stt, smt, [0, 1]))
sm3 = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool)
bad("task_heads", "token_picks", "mask", "a sentence of 2 tokens")(
    lambda: CT.token_picks(stt, smt, stt[..., 0], stt[..., 1], torch.Generator()))
bad("task_heads", "token_picks", "rarity", "a score per sentence, not per token")(
    lambda: CT.token_picks(stt, sm3, stt[..., 0], stt[:, 0], torch.Generator()))
bad("task_heads", "token_picks", "rarity", "NaN on a real token")(
    lambda: CT.token_picks(stt, sm3, stt[..., 0],
                           torch.from_numpy(with_value(st_[..., 1], NAN, (1, 2))),
                           torch.Generator()))
bad("task_heads", "bible_pairs", "fractions", "three shares for four splits")(
    lambda: CT.bible_pairs(CT.template_verses(80, rng), 4, rng, fractions=(0.6, 0.2, 0.2)))
torch.manual_seed(0)
scls = TH.SentenceClassifier(TH.mean_pool_torch, 6)
bad("task_heads", "SentenceClassifier.forward", "states", "float64 states into a float32 model")(
    lambda: scls(stt, smt))
bad("task_heads", "PairModel.forward", "a_mask", "float mask")(
    lambda: TH.PairModel(TH.mean_pool_torch, 6).double()(stt, smt.double(), stt, smt))

# ============================================================================ encoder
cfg = E.BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                   intermediate_size=16, max_position_embeddings=16)
torch.manual_seed(0)
enc = E.MiniLMEncoder(cfg).double()
ids = torch.tensor([[2, 5, 3, 0], [2, 3, 0, 0]])
am = ids != 0
bad("encoder", "MiniLMEncoder.forward", "input_ids", "a token id >= vocab")(
    lambda: enc(torch.tensor([[2, 25, 3]]), torch.ones(1, 3, dtype=torch.bool)))
bad("encoder", "MiniLMEncoder.forward", "input_ids", "a negative token id")(
    lambda: enc(torch.tensor([[2, -1, 3]]), torch.ones(1, 3, dtype=torch.bool)))
bad("encoder", "MiniLMEncoder.forward", "attention_mask", "attention_mask on another device")(
    lambda: enc(ids, am.to(META)))
bad("encoder", "MiniLMEncoder.forward", "attention_mask", "a float mask of 0.5s")(
    lambda: enc(ids, torch.full(ids.shape, 0.5)))
bad("encoder", "MiniLMEncoder.run", "token_type_ids", "a token type >= type_vocab_size")(
    lambda: enc.run(ids, am, token_type_ids=torch.full(ids.shape, 2)))
bad("encoder", "embed", "texts", "an empty list")(lambda: E.embed(enc, None, []))
bad("encoder", "TopLayers.forward", "mask", "mask with a 0 before a 1")(
    lambda: E.TopLayers(enc, 1)(torch.zeros(2, 4, 8, dtype=torch.float64),
                                torch.tensor([[1, 0, 1, 0], [1, 1, 0, 0]], dtype=torch.bool)))
bad("encoder", "TopLayers.forward", "states", "NaN in a padded row (attention reads it)")(
    lambda: E.TopLayers(enc, 1)(
        torch.zeros(1, 4, 8, dtype=torch.float64).index_fill_(1, torch.tensor([3]), math.nan),
        torch.tensor([[1, 1, 1, 0]], dtype=torch.bool)))
bad("encoder", "TokenStates.batch", "indices", "fractional indices")(
    lambda: CE.TokenStates(np.zeros((3, 2), np.float16), np.array([0, 1, 3]),
                           np.zeros(3, np.int32)).batch([0.5]))
bad("encoder", "TokenStates", "offsets", "decreasing offsets")(
    lambda: CE.TokenStates(np.zeros((3, 2), np.float16), np.array([0, 3, 1]),
                           np.zeros(3, np.int32)).batch([1]))
bad("encoder", "BertConfig.from_json", "path", "a missing file")(
    lambda: E.BertConfig.from_json("/nonexistent/config.json"))
bad("encoder", "encode_batch", "texts", "a string instead of a list")(
    lambda: E.encode_batch(None, "hello"))
bad("encoder", "length_sorted_batches", "batch_size", "batch_size = 0")(
    lambda: E.length_sorted_batches(type("Tok", (), {"encode_batch": lambda self, t: [
        type("Enc", (), {"attention_mask": [1]})() for _ in t]})(), ["a", "b"], 0))

# ============================================================================ lstm attention
s5, h5 = R(2, 3, 4), R(2, 5, 4)
Wa = R(1, 4, 4)
m5 = np.ones((2, 5), bool)
s5t, h5t, Wat, m5t = (torch.from_numpy(a) for a in (s5, h5, Wa, m5))
bad("lstm_attention", "luong_attention_np", "mask", "float mask")(
    lambda: LA.luong_attention_np(s5, h5, Wa, m5.astype(float)))
bad("lstm_attention", "luong_attention_np", "W_a", "W_a of the wrong shape")(
    lambda: LA.luong_attention_np(s5, h5, R(4, 4), m5))
bad("lstm_attention", "luong_attention_np", "h", "NaN in a real encoder state")(
    lambda: LA.luong_attention_np(s5, with_value(h5, NAN, (0, 0, 0)), Wa, m5))
bad("lstm_attention", "luong_attention_torch", "h", "h on another device")(
    lambda: LA.luong_attention_torch(s5t, h5t.to(META), Wat, m5t))
bad("lstm_attention", "luong_attention_torch", "W_a", "float32 W_a")(
    lambda: LA.luong_attention_torch(s5t, h5t, Wat.float(), m5t))
bad("lstm_attention", "lstm_cell_np", "weight_ih", "weights of the wrong shape")(
    lambda: LA.lstm_cell_np(R(2, 3), R(2, 4), R(2, 4), R(12, 3), R(16, 4), R(16), R(16)))
bad("lstm_attention", "lstm_cell_torch", "h", "h on another device")(
    lambda: LA.lstm_cell_torch(T(2, 3), T(2, 4).to(META), T(2, 4), T(16, 3), T(16, 4), T(16),
                               T(16)))
bad("lstm_attention", "lstm_np", "x", "2-d x")(
    lambda: LA.lstm_np(R(2, 3), R(16, 3), R(16, 4), R(16), R(16)))
bad("lstm_attention", "lstm_np", "state", "a state without c")(
    lambda: LA.lstm_np(R(2, 3, 3), R(16, 3), R(16, 4), R(16), R(16), state=(R(2, 4),)))
bad("lstm_attention", "output_np", "W1", "W1 of the wrong width")(
    lambda: LA.output_np(R(2, 4), R(2, 4), R(5, 7), R(5), R(3, 5), R(3)))
bad("lstm_attention", "output_torch", "W2", "float32 W2")(
    lambda: LA.output_torch(T(2, 4), T(2, 4), T(5, 8), T(5), T(3, 5, dtype=torch.float32), T(3)))
bad("lstm_attention", "lexical_probe_np", "targets", "a target id >= V")(
    lambda: LA.lexical_probe_np(h5, s5, np.array([[0, 1, 3], [0, 0, 0]]), R(5, 8), R(5), R(3, 5),
                                R(3)))
bad("lstm_attention", "lexical_probe_torch", "targets", "a negative target id")(
    lambda: LA.lexical_probe_torch(h5t, s5t, torch.tensor([[0, -1, 2], [0, 0, 0]]), T(5, 8), T(5),
                                   T(3, 5), T(3)))
bad("lstm_attention", "score_gradient_np", "alpha", "alpha of the wrong length")(
    lambda: LA.score_gradient_np(np.full((2, 3, 4), 0.25), h5, s5))
bad("lstm_attention", "score_gradient_np", "h", "NaN in h")(
    lambda: LA.score_gradient_np(np.full((2, 3, 5), 0.2), with_value(h5, NAN, (0, 0, 0)), s5))
bad("lstm_attention", "output_gradient_np", "targets", "a target id >= V")(
    lambda: LA.output_gradient_np(s5, s5, np.array([[0, 1, 3], [0, 0, 0]]), R(5, 8), R(5),
                                  R(3, 5), R(3)))
bad("agreement", "classifier_np", "mask", "float mask")(
    lambda: AG.classifier_np(h5, R(4, 4), R(4), R(4), R(4), 0.0, m5.astype(float)))
bad("agreement", "classifier_np", "b0", "b0 as a string")(
    lambda: AG.classifier_np(h5, R(4, 4), R(4), R(4), R(4), "0.5", m5))
bad("agreement", "classifier_probe_np", "b0", "NaN b0")(
    lambda: AG.classifier_probe_np(h5, R(4), math.nan, np.array([1, 0])))
bad("agreement", "classifier_torch", "h", "NaN in h")(
    lambda: AG.classifier_torch(with_value(h5t, NAN, (0, 0, 0)), T(4, 4), T(4), T(4), T(4), 0.0))
bad("agreement", "classifier_probe_np", "labels", "labels of the wrong length")(
    lambda: AG.classifier_probe_np(h5, R(4), 0.0, np.array([1, 0, 1])))
bad("agreement", "classifier_probe_torch", "labels", "labels of the wrong length")(
    lambda: AG.classifier_probe_torch(h5t, T(4), 0.0, torch.tensor([1, 0, 1])))
bad("agreement", "agreement_np", "mask", "float mask")(
    lambda: AG.agreement_np(R(2, 5), R(2, 5), np.ones((2, 5))))
bad("agreement", "agreement_np", "mask", "a row with no real position")(
    lambda: AG.agreement_np(R(2, 5), R(2, 5), np.array([[1, 1, 0, 0, 0], [0, 0, 0, 0, 0]], bool)))
bad("agreement", "agreement_np", "a", "NaN in a")(
    lambda: AG.agreement_np(with_value(R(2, 5), NAN, (0, 0)), R(2, 5)))
bad("agreement", "agreement_torch", "mask", "float mask")(
    lambda: AG.agreement_torch(T(2, 5), T(2, 5), torch.ones(2, 5)))
bad("agreement", "agreement_torch", "b", "b on another device")(
    lambda: AG.agreement_torch(T(2, 5), T(2, 5).to(META)))
bad("agreement", "agreement_baseline_np", "lengths", "fractional lengths")(
    lambda: AG.agreement_baseline_np([2.5, 3]))
bad("agreement", "contextualized_agreement", "threshold", "NaN threshold")(
    lambda: AG.contextualized_agreement([0.1, 0.2], [1.0, 2.0], NAN))
bad("agreement", "checkpoints", "every", "every = 0")(lambda: AGC.checkpoints(100, (0, 10), 0))
torch.manual_seed(0)
s2s = AG.Seq2SeqAttention(6, 7, hidden=8)
bad("agreement", "Seq2SeqAttention.forward", "src", "a source id >= n_src")(
    lambda: s2s(torch.tensor([[1, 6]]), torch.tensor([[1, 2]])))
bad("agreement", "Seq2SeqAttention.forward", "src_mask", "float src_mask")(
    lambda: s2s(torch.tensor([[1, 2]]), torch.tensor([[1, 2]]), torch.ones(1, 2)))
bad("agreement", "Seq2SeqAttention.probe", "tgt_out", "a target id >= n_tgt")(
    lambda: s2s.probe(torch.tensor([[1, 2]]), torch.tensor([[1, 2]]), torch.tensor([[1, 9]])))
bad("agreement", "Seq2SeqAttention", "hidden", "hidden = 2.5")(
    lambda: AG.Seq2SeqAttention(6, 7, 2.5))
torch.manual_seed(0)
acls = AG.AttentionClassifier(6, hidden=8)
bad("agreement", "AttentionClassifier.forward", "x", "a token id >= n_vocab")(
    lambda: acls(torch.tensor([[1, 6]])))
bad("agreement", "AttentionClassifier.forward", "mask", "mask of the wrong shape")(
    lambda: acls(torch.tensor([[1, 2]]), torch.ones(1, 3, dtype=torch.bool)))
bad("agreement", "AttentionClassifier", "n_vocab", "n_vocab = 0")(
    lambda: AG.AttentionClassifier(0))

# ============================================================================ ibm1
bx = ibm1.make_bitext([["a", "b"], ["a"]], [["A", "B"], ["A"]])
t0 = ibm1.uniform_table_np(bx)
fb = ibm1_fast.index_bitext([["a", "b"], ["a"]], [["A", "B"], ["A"]])
tf = ibm1_fast.uniform_table_fast_np(fb)
bad("ibm1", "em_np", "iterations", "iterations = -1")(lambda: ibm1.em_np(bx, -1))
bad("ibm1", "em_np", "iterations", "iterations = 2.5")(lambda: ibm1.em_np(bx, 2.5))
bad("ibm1", "em_np", "t", "an all-zero table")(lambda: ibm1.em_np(bx, 1, t=np.zeros_like(t0)))
bad("ibm1", "e_step_np", "t", "an all-zero table")(lambda: ibm1.e_step_np(np.zeros_like(t0), bx))
bad("ibm1", "e_step_np", "t", "negative probabilities")(lambda: ibm1.e_step_np(-t0, bx))
bad("ibm1", "e_step_np", "t", "NaN in the table")(lambda: ibm1.e_step_np(with_value(t0, NAN), bx))
bad("ibm1", "e_step_torch", "t", "an all-zero table")(
    lambda: ibm1.e_step_torch(torch.zeros(t0.shape, dtype=torch.float64), bx))
bad("ibm1", "e_step_torch", "t", "an integer table")(
    lambda: ibm1.e_step_torch(torch.ones(t0.shape, dtype=torch.long), bx))
bad("ibm1", "m_step_np", "counts", "negative counts")(lambda: ibm1.m_step_np(-t0))
bad("ibm1", "m_step_np", "floor", "negative floor")(lambda: ibm1.m_step_np(t0, -1.0))
bad("ibm1", "m_step_np", "counts", "1-d counts")(lambda: ibm1.m_step_np(t0[0]))
bad("ibm1", "m_step_torch", "counts", "NaN in counts")(
    lambda: ibm1.m_step_torch(with_value(torch.from_numpy(t0), NAN)))
bad("ibm1", "em_torch", "iterations", "iterations = -1")(lambda: ibm1.em_torch(bx, -1))
bad("ibm1", "em_torch", "t", "an all-zero table")(
    lambda: ibm1.em_torch(bx, 1, t=torch.zeros(t0.shape, dtype=torch.float64)))
bad("ibm1", "alignment_matrix_np", "m", "pair index past the corpus")(
    lambda: ibm1.alignment_matrix_np(t0, bx, 5))
bad("ibm1", "alignment_matrix_np", "t", "an all-zero table")(
    lambda: ibm1.alignment_matrix_np(np.zeros_like(t0), bx, 0))
bad("ibm1", "viterbi_np", "t", "NaN in the table")(lambda: ibm1.viterbi_np(with_value(t0, NAN), bx))
bad("ibm1", "top_translations_np", "k", "k = -1")(lambda: ibm1.top_translations_np(t0, bx, "a", -1))
bad("ibm1", "top_translations_np", "t", "table of the wrong shape")(
    lambda: ibm1.top_translations_np(t0[:, :1], bx, "a"))
bad("ibm1", "make_bitext", "sources", "a string sentence")(
    lambda: ibm1.make_bitext(["a b"], [["A"]]))
bad("ibm1", "token_weights_np", "mode", "unknown mode")(
    lambda: ibm1.token_weights_np(np.array([0, 1]), "x"))
bad("ibm1", "proxy_prediction_np", "counts", "1-d counts")(
    lambda: ibm1.proxy_prediction_np(np.ones(3)))
bad("ibm1", "proxy_agreement_torch", "d", "d = 0")(
    lambda: ibm1.proxy_agreement_torch(ibm1.make_bitext([["a"]], [["A"]], null=False), 0))
bad("ibm1", "BagOfWordsProxy", "d", "d = 0")(lambda: ibm1.BagOfWordsProxy(3, 3, 0))
bad("ibm1", "BagOfWordsProxy.forward", "xbar", "xbar of the wrong width")(
    lambda: ibm1.BagOfWordsProxy(3, 3, 4)(torch.ones(2, 5)))
bad("ibm1", "em_fast_np", "iterations", "iterations = -1")(lambda: ibm1_fast.em_fast_np(fb, -1))
bad("ibm1", "e_step_fast_np", "t", "an all-zero table")(
    lambda: ibm1_fast.e_step_fast_np(np.zeros_like(tf), fb))
bad("ibm1", "e_step_fast_np", "t", "NaN in the table")(
    lambda: ibm1_fast.e_step_fast_np(with_value(tf, NAN), fb))
bad("ibm1", "m_step_fast_np", "floor", "NaN floor")(lambda: ibm1_fast.m_step_fast_np(tf, fb, NAN))
bad("ibm1", "e_step_fast_torch", "t", "an all-zero table")(
    lambda: ibm1_fast.e_step_fast_torch(torch.zeros(len(tf), dtype=torch.float64), fb))
bad("ibm1", "em_fast_torch", "iterations", "iterations = 1.5")(
    lambda: ibm1_fast.em_fast_torch(fb, 1.5))
bad("ibm1", "alignment_matrix_fast_np", "m", "pair index past the corpus")(
    lambda: ibm1_fast.alignment_matrix_fast_np(tf, fb, 7))
bad("ibm1", "position_entries_np", "m", "negative pair index")(
    lambda: ibm1_fast.position_entries_np(fb, -5))
bad("ibm1", "rows_np", "words", "an unknown word")(lambda: ibm1_fast.rows_np(tf, fb, ["zzz"]))
bad("ibm1", "top_translations_fast_np", "k", "k = -2")(
    lambda: ibm1_fast.top_translations_fast_np(tf, fb, "a", -2))
bad("ibm1", "viterbi_fast_np", "t", "NaN in the table")(
    lambda: ibm1_fast.viterbi_fast_np(with_value(tf, NAN), fb))
bad("ibm1", "index_bitext", "targets", "an empty target sentence")(
    lambda: ibm1_fast.index_bitext([["a"]], [[]]))

# ============================================================================ tasks
G = lambda: torch.Generator().manual_seed(0)  # noqa: E731
bad("attention", "associative_recall", "batch_size", "batch_size = 2.5")(
    lambda: CA.associative_recall(2.5, 2, 4, 4, G()))
bad("attention", "associative_recall", "n_keys", "n_keys = -1")(
    lambda: CA.associative_recall(2, 0, -1, 4, G()))
bad("sparse", "two_halves", "n", "n = 3.5")(lambda: CS.two_halves(2, 3.5, G()))
bad("multiscale", "effective_scale_task", "k", "k = 1.5")(
    lambda: CM.effective_scale_task(2, 6, 3, 1.5, G()))
bad("multiscale", "glove_corpus", "vectors", "1-d vectors")(
    lambda: CM.glove_corpus({"train": ["a b"]}, ["a", "b"], np.ones(2), 4))
bad("lstm_attention", "dictionary_corpus", "n_pairs", "n_pairs = -1")(
    lambda: LAC.dictionary_corpus(-1, 5, np.random.default_rng(0)))
bad("lstm_attention", "dictionary_corpus", "length", "length (5, 2)")(
    lambda: LAC.dictionary_corpus(2, 5, np.random.default_rng(0), length=(5, 2)))
bad("lstm_attention", "permutation_corpus", "n_types", "n_types > n_vocab")(
    lambda: LAC.permutation_corpus(2, 5, 3, np.random.default_rng(0)))
bad("lstm_attention", "two_sets_corpus", "n_pairs", "n_pairs = -2")(
    lambda: LAC.two_sets_corpus(-2, 3, np.random.default_rng(0)))
bad("tools.train", "length_batches", "lengths", "negative lengths")(
    lambda: TR.length_batches(torch.tensor([2, -1]), 1, G()))
bad("xl", "char_corpus", "texts", "an empty list")(lambda: XC.char_corpus([]))
bad("xl", "lm_streams", "n_streams", "n_streams = 1.5")(
    lambda: XC.lm_streams(torch.arange(10), 1.5))
bad("xl", "lm_segment", "seg_len", "seg_len = 0")(
    lambda: XC.lm_segment(torch.zeros(2, 10, dtype=torch.long), 0, 0))
bad("xl", "lm_segment", "index", "index = -1")(
    lambda: XC.lm_segment(torch.zeros(2, 10, dtype=torch.long), -1, 3))
bad("xl", "synthetic_text", "n_chars", "n_chars = -5")(
    lambda: XC.synthetic_text(-5, np.random.default_rng(0)))
bad("xl", "delayed_copy", "distance", "distance = 1.5")(lambda: XC.delayed_copy(2, 5, 1.5, 3, G()))
bad("agreement", "keyword_task", "keyword", "keyword outside the vocabulary")(
    lambda: AGC.keyword_task(2, 4, 3, np.random.default_rng(0), keyword=9))
bad("agreement", "build_vocab", "max_size", "max_size = -1")(
    lambda: AGC.build_vocab([["a"]], max_size=-1))
bad("agreement", "encode_sentences", "vocab", "a vocabulary without <pad>")(
    lambda: AGC.encode_sentences([["a"]], {"a": 0}))
bad("task_heads", "bible_pairs", "tolerance", "tolerance = -1 (logits)")(
    lambda: CT.bible_pairs([("a", "b")] * 40, 4, np.random.default_rng(0), tolerance=-1.0))
bad("task_heads", "random_token_states", "dim", "dim = 0")(lambda: CT.random_token_states(["a"], 0))
bad("task_heads", "template_sentiment", "n", "n = -1")(
    lambda: CT.template_sentiment(-1, np.random.default_rng(0)))
bad("task_heads", "template_verses", "n_topics", "n_topics = 0")(
    lambda: CT.template_verses(3, np.random.default_rng(0), n_topics=0))

# ============================================================================ other models
torch.manual_seed(0)
rec = A.RecallAttention(5, 4, d_model=8)
bad("attention", "RecallAttention.forward", "keys", "a key id >= n_keys")(
    lambda: rec(torch.tensor([[1]]), torch.tensor([[7]]), torch.tensor([[1]])))
bad("attention", "RecallAttention.forward", "values", "values of another shape than keys")(
    lambda: rec(torch.tensor([[1]]), torch.tensor([[1, 2]]), torch.tensor([[1]])))
bad("attention", "RecallMeanPool.forward", "values", "a value id >= n_values")(
    lambda: A.RecallMeanPool(5, 4, 8)(torch.tensor([[1]]), torch.tensor([[1]]),
                                      torch.tensor([[4]])))
bad("attention", "PositionReader", "positions", "an unknown kind of positions")(
    lambda: A.PositionReader(5, 4, "rotary"))
bad("attention", "PositionReader", "init_std", "a learned table of init std 0")(
    lambda: A.PositionReader(5, 4, "learned", init_std=0.0))
bad("attention", "PositionReader.forward", "tokens", "a sequence longer than max_len")(
    lambda: A.PositionReader(5, 4, "sinusoid", d_model=8)(torch.zeros(1, 6, dtype=torch.long)))
bad("attention", "reversal", "n", "n > n_symbols")(lambda: CA.reversal(2, 6, 4, G()))
tb = CM.TransformerBaseline(4, 8, 2, 1, 2, max_len=5, embedding=torch.nn.Embedding(6, 4))
bad("multiscale", "TransformerBaseline.forward", "inputs", "sequence longer than max_len")(
    lambda: tb(torch.zeros(1, 7, dtype=torch.long)))
bad("multiscale", "TransformerBaseline.forward", "lengths", "a length longer than N")(
    lambda: tb(torch.zeros(1, 3, dtype=torch.long), torch.tensor([4])))
bad("multiscale", "BiLSTMClassifier.forward", "lengths", "a length of 0")(
    lambda: CM.BiLSTMClassifier(4, 3, 2)(torch.zeros(1, 3, 4), torch.tensor([0])))
vlm = X.VanillaLM(7, 8, 2, 1)
bad("xl", "VanillaLM.forward", "tokens", "a token id >= vocab")(lambda: vlm(torch.tensor([[1, 9]])))
bad("xl", "VanillaLM.forward", "tokens", "1-d tokens")(lambda: vlm(torch.tensor([1, 2])))
bad("tools.train", "count_parameters", "model", "not a module")(lambda: TR.count_parameters([1, 2]))

# ======================================================================== GPU dispatch (on a CPU)
from minattn.fast import flex as FL  # noqa: E402

D = FL  # the dispatch and the flex kernels: one file

qd = torch.from_numpy(R(1, 6, 4))
bad("sparse", "choose_kernel", "n", "n = -1")(lambda: D.choose_kernel("cpu", -1))
bad("sparse", "dense_window_attention", "q", "NaN in q")(
    lambda: D.dense_window_attention(with_value(qd, NAN, (0, 0, 0)), qd, qd, 1))
bad("sparse", "dense_window_attention", "w", "w = 1.5")(
    lambda: D.dense_window_attention(qd, qd, qd, 1.5))
bad("sparse", "dense_block_sparse_attention", "layout", "a float layout")(
    lambda: D.dense_block_sparse_attention(qd, qd, qd, torch.ones(3, 3), 2))
bad("sparse", "window_tiles_np", "n", "n = -1")(lambda: FL.window_tiles_np(-1, 2))
bad("multiscale", "multiscale_tiles_np", "windows", "a negative window")(
    lambda: FL.multiscale_tiles_np(8, [-1, 2]))
bad("xl", "XLDecoder", "batch", "batch = -1")(lambda: XF.XLDecoder(xlm, 4, -1))
bad("xl", "XLDecoder", "context", "context = 0")(lambda: XF.XLDecoder(xlm, 0))


def survey(entries=BAD) -> dict:
    """{module: Counter(category)} and the list of (entry, category, message)."""
    import torch._dynamo  # noqa: F401  (the first meta-device call imports it: not in a timed call)

    counts, rows = defaultdict(Counter), []
    for entry in entries:
        category, message = classify(entry)
        counts[entry.module][category] += 1
        rows.append((entry, category, message))
    return counts, rows


def main() -> int:
    counts, rows = survey()
    cats = ("clear", "unclear", "raw", "silent")
    print(f"{'module':16}" + "".join(f"{c:>9}" for c in cats) + f"{'total':>9}")
    total = Counter()
    for module, c in counts.items():
        total.update(c)
        print(f"{module:16}" + "".join(f"{c[x]:>9}" for x in cats) + f"{sum(c.values()):>9}")
    print(f"{'all':16}" + "".join(f"{total[x]:>9}" for x in cats) + f"{sum(total.values()):>9}")
    functions = {(e.module, e.function) for e in BAD}
    print(f"\n{len(BAD)} bad calls on {len(functions)} public functions and methods\n")
    for entry, category, message in rows:
        if category != "clear" and "-v" in sys.argv:
            print(f"[{category}] {entry.function} ({entry.what}): {message[:160]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
