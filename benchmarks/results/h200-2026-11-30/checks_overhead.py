"""Why `dispatched` trails its own route in sparse_bf16.json (run on the H200 as
`OUT=folder PYTHONPATH=$PWD python3 benchmarks/results/h200-2026-11-30/checks_overhead.py`).

The benchmark hands every contender leaf tensors. The routed functions' contracts read a leaf's
values (one sum per tensor per decorated function, and a device sync to test it); they skip
activations, tensors with a grad_fn, which is what attention gets inside a model. So each
contender runs here on leaves and on activations (x * 1), forward + backward, interleaved."""

import json
import os
import time

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import flex_attention

from minattn.course.bench import time_interleaved
from minattn.fast import flex
from minattn.fast.flex import window_attention_routed_fast_torch
from minattn.sparse import sliding_window_mask_np

DEV, W, OUT = torch.device("cuda"), 128, {}
users_flex = torch.compile(flex_attention)


def timed(fn, leaves, grad, activations: bool):
    def run():
        x = [t * 1 for t in leaves] if activations else leaves  # x * 1 has a grad_fn
        fn(*x).backward(grad)
        for t in leaves:
            t.grad = None
    return run


for dtype in (torch.bfloat16, torch.float32):
    for n in (4096, 8192, 16384):
        gen = torch.Generator().manual_seed(n)
        leaves = [torch.randn(1, 8, n, 64, generator=gen).to(DEV, dtype).requires_grad_()
                  for _ in range(3)]
        grad = torch.ones_like(leaves[0])
        mask = torch.from_numpy(sliding_window_mask_np(n, W)).to(DEV)
        block_mask = flex.window_block_mask(n, W, device=DEV)

        def routed(q, k, v):
            return window_attention_routed_fast_torch(q, k, v, W)

        def dense(q, k, v):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

        def user(q, k, v):
            q, k, v = (t.reshape(-1, 1, n, 64) for t in (q, k, v))
            return users_flex(q, k, v, block_mask=block_mask).reshape(1, 8, n, 64)

        def ours(q, k, v):
            return flex.flex_window_attention(q, k, v, W, compiled=True)

        fns = {"routed, leaf": timed(routed, leaves, grad, False),
               "routed, activations": timed(routed, leaves, grad, True),
               "dense sdpa, activations": timed(dense, leaves, grad, True),
               "user flex, activations": timed(user, leaves, grad, True),
               "our flex, activations": timed(ours, leaves, grad, True)}
        ms = {k: round(v * 1e3, 3) for k, v in time_interleaved(fns, 20, 2, DEV).items()}
        name = str(dtype).removeprefix("torch.")
        OUT[f"{name} {n}"] = dict(route=flex.choose_kernel(DEV, n, dtype, 64), **ms)
        print(name, n, OUT[f"{name} {n}"], flush=True)
        with open(os.path.join(os.environ["OUT"], "checks_overhead.json"), "w") as f:
            json.dump(dict(torch=torch.__version__, gpu=torch.cuda.get_device_name(),
                           date=time.strftime("%Y-%m-%d"), w=W, B=1, H=8, d=64,
                           unit="ms, median of 20 interleaved fwd+bwd", results=OUT), f,
                      indent=1)
