"""Train and evaluate the character LMs of lesson 04 (Transformer-XL and its vanilla baseline):
bits per character (segment by segment, or with the paper's sliding window), sampling, how
far back a model sees and which states one token reaches, accuracy on the synthetic tasks,
training with or without the stop-gradient; training runs in one process, or in many with
DistributedDataParallel.

The same command runs alone or under `torchrun`, unchanged:

    python -m minattn.xl.train --data ptb --steps 2000 --out runs/xl            # one process
    python -m minattn.xl.train --data ptb --steps 4000 --out runs/xl --resume   # continue it
    torchrun --standalone --nproc_per_node=8 -m minattn.xl.train --data enwik8 --out runs/xl
                                                                  # one node, 8 GPUs (NCCL)
    torchrun --nnodes=2 --nproc_per_node=8 --rdzv_id=xl --rdzv_backend=c10d \
             --rdzv_endpoint=HOST0:29500 -m minattn.xl.train --data enwik8 --out runs/xl
                                                    # run on every node; HOST0 = first node
    torchrun --standalone --nproc_per_node=2 -m minattn.xl.train --device cpu ...  # CPU, gloo

How the work is split. The training text is cut into `--batch` contiguous streams (the global
batch, `data.lm_streams`); with W processes, rank r reads streams r·b … (r+1)·b − 1
(b = batch / W), one segment of each per step, and carries *those* streams' memory from step
to step. DDP averages the gradients over ranks, so W processes take exactly the steps that one
process takes with the whole global batch (tests/test_xl.py checks this with 2 CPU processes).

Checkpoints. Rank 0 writes `<out>/checkpoint.pt` every `--save-every` steps and at the end,
atomically (a temporary file, then a rename: an interrupted write never leaves half a file).
The memories of every rank are gathered into it, so `--resume` continues exactly where the
run stopped — with any number of processes that divides the batch.
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from ..checks import fail
from ..course.data import DatasetMissing, load_lm_text
from .data import char_corpus, lm_segment, lm_streams, synthetic_text
from .decoder import XLDecoder
from .model import TransformerXL


# ============================================================================ evaluating the LMs
def lm_loss(logits, targets):
    """Mean next-token cross-entropy in nats; targets of -100 are ignored."""
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)


@torch.no_grad()
def evaluate_bpc(model, streams, seg_len: int, mem_len: int | None = None,
                 max_segments: int | None = None, per_stream: bool = False, **forward_kwargs):
    """Bits per character over `streams` (B, T), read segment after segment in order: a float,
    or with per_stream=True a (B,) array, one value per stream (the test items of a paired
    comparison between models read on the same streams).

    A `TransformerXL` carries its memory (of `mem_len`, default its training length) from
    one segment to the next (`forward_kwargs`, e.g. clamp_len, go to it); a `VanillaLM`
    reads each segment on its own.
    """
    model.eval()
    n_segments = (streams.shape[1] - 1) // seg_len
    if max_segments is not None:
        n_segments = min(n_segments, max_segments)
    total, memories = torch.zeros(streams.shape[0], dtype=torch.float64), None
    for s in range(n_segments):
        x = streams[:, s * seg_len:(s + 1) * seg_len]
        y = streams[:, s * seg_len + 1:(s + 1) * seg_len + 1]
        logits, memories = model(x, memories, mem_len, **forward_kwargs)
        total += F.cross_entropy(logits.transpose(1, 2), y, reduction="none").sum(1).double().cpu()
    bpc = (total / (n_segments * seg_len) / math.log(2)).numpy()
    return bpc if per_stream else float(bpc.mean())


@torch.no_grad()
def evaluate_bpc_sliding(model, streams, window: int, batch_windows: int = 2048,
                         per_stream: bool = False):
    """Bits per character over `streams` (B, T) when every character is predicted from a
    window of the `window` characters up to it, read afresh (fewer at the start of a stream):
    the evaluation of the paper's vanilla baseline (Al-Rfou et al.), whose window slides by
    one character per prediction. Same characters as `evaluate_bpc` when T − 1 is a multiple
    of its segment length (and per_stream=True: the same (B,) array per stream). Costs
    `window` positions per character."""
    model.eval()
    B, T = streams.shape
    if not 0 < window < T:
        fail("the window must fit in the streams", f"0 < window < T = {T}", f"window={window}")
    x, y = streams[:, :-1], streams[:, 1:]
    logits, _ = model(x[:, :window])  # the first window: every position (less context)
    losses = [F.cross_entropy(logits.transpose(1, 2), y[:, :window], reduction="none")]
    windows = x.unfold(1, window, 1)[:, 1:].reshape(-1, window)  # ending at each j >= window
    targets = y[:, window:].reshape(-1)
    last = [F.cross_entropy(model(windows[i:i + batch_windows])[0][:, -1],
                            targets[i:i + batch_windows], reduction="none")
            for i in range(0, len(windows), batch_windows)]
    if last:  # stream-major, as unfolded
        losses.append(torch.cat(last).view(B, -1))
    bpc = (torch.cat(losses, 1).sum(1).double().cpu() / y.shape[1] / math.log(2)).numpy()
    return bpc if per_stream else float(bpc.mean())


@torch.no_grad()
def generate(model, prompt, n_new: int, generator: torch.Generator, context: int,
             temperature: float = 1.0):
    """Sample n_new tokens after prompt (1, P) -> (1, P + n_new).

    A `TransformerXL` reads the prompt once and then one token per step, its memory (length
    `context`) holding the past: the cached evaluation, through `decoder.XLDecoder`, which
    keeps the memory's keys and values instead of projecting the memory again every step.
    A `VanillaLM` recomputes its whole window of the last `context` tokens for every new token.
    """
    model.eval()
    P = prompt.shape[1]
    tokens = torch.cat([prompt, prompt.new_zeros(prompt.shape[0], n_new)], dim=1)  # filled below
    if isinstance(model, TransformerXL):
        decoder = XLDecoder(model, context, batch=prompt.shape[0])
        logits = decoder.prefill(prompt[:, -context:])
    for i in range(P, P + n_new):
        if not isinstance(model, TransformerXL):
            logits, _ = model(tokens[:, max(i - context, 0):i])
        probs = torch.softmax(logits[:, -1] / temperature, dim=-1)
        nxt = torch.multinomial(probs.cpu(), 1, generator=generator).to(tokens.device)
        tokens[:, i:i + 1] = nxt
        if isinstance(model, TransformerXL):
            logits = decoder.step(nxt)
    return tokens


@torch.no_grad()
def farthest_visible(model, seg_len: int, mem_len: int, n_segments: int, vocab_size: int,
                     seed: int = 0) -> int:
    """How far back can the last token of a segment see? Measured, not derived.

    Reads a random text of n_segments segments (memory `mem_len`) once as it is and once with
    each earlier token changed (all at once, one batch row per changed position), and returns
    the largest distance d whose change moves the logits of the very last token. Runs a
    float64 copy of `model`, so "moved" is a clear signal (> 1e-9), not rounding.
    """
    model = copy.deepcopy(model).double().eval()
    T = seg_len * n_segments
    tokens = torch.randint(0, vocab_size, (1, T), generator=torch.Generator().manual_seed(seed))
    batch = tokens.repeat(T, 1)  # row d: the token d places before the last one is changed
    d = torch.arange(T)
    batch[d, T - 1 - d] = (batch[d, T - 1 - d] + 1) % vocab_size
    batch = torch.cat([tokens, batch[1:]]).to(next(model.parameters()).device)  # row 0: as is
    memories = None
    for s in range(n_segments):
        logits, memories = model(batch[:, s * seg_len:(s + 1) * seg_len], memories, mem_len)
    moved = (logits[1:, -1] - logits[:1, -1]).abs().amax(dim=-1) > 1e-9  # (T − 1,) d = 1, 2, …
    return int(torch.nonzero(moved).max()) + 1 if moved.any() else 0


@torch.no_grad()
def dependency_cone(model, seg_len: int, n_segments: int, position: int, vocab_size: int,
                    mem_len: int | None = None, seed: int = 0) -> np.ndarray:
    """Which hidden states does one token reach? The paper's Fig. 2, measured.

    Reads a random text of n_segments segments (memory `mem_len` for a `TransformerXL`; a
    `VanillaLM` reads each segment alone) twice, the second time with the token at `position`
    changed, and returns a bool array (n_layers + 1, n_segments · seg_len): row 0 the inputs
    (the embedded tokens), row n the output of layer n; True where the state changed
    (> 1e-9, in a float64 copy of the model).
    """
    model = copy.deepcopy(model).double().eval()
    T = seg_len * n_segments
    if not 0 <= position < T:
        fail("position must be in the text", f"0 <= position < {T}", str(position))
    tokens = torch.randint(0, vocab_size, (1, T), generator=torch.Generator().manual_seed(seed))
    changed = tokens.clone()
    changed[0, position] = (changed[0, position] + 1) % vocab_size
    batch = torch.cat([tokens, changed]).to(next(model.parameters()).device)
    states = [[] for _ in range(len(model.layers) + 1)]  # per row: one (2, seg_len, D) per segment
    record = lambda n: lambda module, inputs, out: states[n].append(  # noqa: E731
        out[0] if isinstance(out, tuple) else out)
    hooks = [model.embedding.register_forward_hook(record(0))]
    hooks += [layer.register_forward_hook(record(n + 1)) for n, layer in enumerate(model.layers)]
    try:
        memories = None
        for s in range(n_segments):
            _, memories = model(batch[:, s * seg_len:(s + 1) * seg_len], memories, mem_len)
    finally:
        for hook in hooks:
            hook.remove()
    rows = [torch.cat(parts, dim=1) for parts in states]  # (2, T, D) per row
    return np.stack([((h[1] - h[0]).abs().amax(-1) > 1e-9).cpu().numpy() for h in rows])


def recurrent_lm_loss(stop_gradient: bool = True):
    """A `loss_fn` for `tools.train.train` that carries the memory from one batch to the next:
    batch s must be segment s of the same streams. (A `VanillaLM` returns no memory.)

    stop_gradient=False (a `TransformerXL` only) is the experiment without the paper's SG for
    one segment: every step reads the previous segment again, from the memory before it and
    with the current weights, keeps those states in the graph, and reads this segment on top
    of them, so this segment's loss back-propagates one segment further back (twice the
    compute; the loss is still this segment's alone).
    """
    state = {"memories": None, "previous": None, "before": None}

    def loss_fn(model, x, y):
        memories = state["memories"]
        if not stop_gradient and state["previous"] is not None:
            _, memories = model(state["previous"], state["before"], stop_gradient=False)
        logits, state["memories"] = model(x, memories)
        if not stop_gradient:  # what the next step reads again: this segment and its memory
            state["previous"] = x
            state["before"] = None if memories is None else [m.detach() for m in memories]
        return lm_loss(logits, y)
    return loss_fn


@torch.no_grad()
def stream_predictions(model, tokens, seg_len: int, mem_len: int | None = None,
                       **forward_kwargs) -> torch.Tensor:
    """The most likely next token at every position of (B, T) streams read segment by segment
    (memory carried for a `TransformerXL`; `forward_kwargs`, e.g. clamp_len, go to it):
    (B, T') with T' = T rounded down to whole segments."""
    model.eval()
    predictions, memories = [], None
    for s in range(tokens.shape[1] // seg_len):
        logits, memories = model(tokens[:, s * seg_len:(s + 1) * seg_len], memories, mem_len,
                                 **forward_kwargs)
        predictions.append(logits.argmax(-1))
    return torch.cat(predictions, dim=1)


def stream_accuracy(model, tokens, targets, seg_len: int, mem_len: int | None = None,
                    by_position: bool = False, **forward_kwargs):
    """Next-token accuracy over (B, T) streams read segment by segment (`stream_predictions`);
    positions with target -100 are skipped.

    by_position=True returns a (seg_len,) array instead: the accuracy at each index of a
    segment (NaN where no target was counted).
    """
    predictions = stream_predictions(model, tokens, seg_len, mem_len, **forward_kwargs)
    targets = targets[:, :predictions.shape[1]]
    keep = targets != -100
    hits = ((predictions == targets) & keep).cpu()
    if by_position:
        per_index = lambda a: a.view(a.shape[0], -1, seg_len).sum((0, 1)).double()  # noqa: E731
        return (per_index(hits) / per_index(keep.cpu())).numpy()  # 0/0 -> NaN
    return hits.sum().item() / max(keep.sum().item(), 1)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default="ptb",
                   choices=["ptb", "shakespeare", "enwik8", "text8", "synthetic"])
    p.add_argument("--steps", type=int, default=1000, help="total optimizer steps")
    p.add_argument("--batch", type=int, default=32, help="global batch: streams over all ranks")
    p.add_argument("--seg", type=int, default=64, help="segment length L")
    p.add_argument("--mem", type=int, default=64, help="memory length M")
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-chars", type=int, default=None, help="use only the start of the text")
    p.add_argument("--out", type=Path, default=Path("runs/xl"))
    p.add_argument("--save-every", type=int, default=200)
    p.add_argument("--log-every", type=int, default=50)
    p.add_argument("--eval-segments", type=int, default=20, help="validation segments at the end")
    p.add_argument("--resume", action="store_true", help="continue from <out>/checkpoint.pt")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when present)")
    p.add_argument("--double", action="store_true", help="float64 (for exact comparisons)")
    return p.parse_args(argv)


def load_texts(name: str, max_chars: int | None) -> tuple[str, str]:
    """(train, valid) text; 'synthetic' (and a missing dataset, with a message) gives the
    offline fallback of `data.synthetic_text`."""
    if name != "synthetic":
        try:
            return (load_lm_text(name, "train")[:max_chars],
                    load_lm_text(name, "valid")[:max_chars])
        except DatasetMissing as err:
            print(f"{err}; training on synthetic text instead")
    rng = np.random.default_rng(0)
    n = max_chars or 200_000
    return synthetic_text(n, rng), synthetic_text(max(n // 10, 2_000), rng)


def setup_distributed(device_name: str | None) -> tuple[int, int, torch.device]:
    """(rank, world size, device). Under torchrun (WORLD_SIZE > 1) joins the process group:
    NCCL with one GPU per process (LOCAL_RANK), gloo on CPU."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank, local_rank = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = torch.cuda.is_available() if device_name is None else device_name.startswith("cuda")
    device = torch.device(f"cuda:{local_rank}" if use_cuda else "cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    if world > 1:
        dist.init_process_group("nccl" if use_cuda else "gloo")
    return rank, world, device


def gather_memories(memories, world: int):
    """Every rank's (b, M, D) memory per layer -> (b·W, M, D) in rank order (for rank 0)."""
    if world == 1:
        return [m.cpu() for m in memories]
    out = []
    for m in memories:
        parts = [torch.empty_like(m) for _ in range(world)]
        dist.all_gather(parts, m.contiguous())
        out.append(torch.cat(parts).cpu())
    return out


def save_checkpoint(path: Path, payload: dict) -> None:
    """torch.save to a temporary file, then rename: the checkpoint is whole or absent."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".pt.tmp")
    torch.save(payload, tmp)
    os.replace(tmp, path)


def main(argv=None) -> dict:
    args = parse_args(argv)
    rank, world, device = setup_distributed(args.device)
    if args.batch % world:
        fail("the global batch must split evenly over the processes",
             f"--batch divisible by {world}", f"--batch {args.batch}")
    dtype = torch.float64 if args.double else torch.float32
    torch.manual_seed(args.seed)  # same seed on every rank: identical initial weights
    train_text, valid_text = load_texts(args.data, args.max_chars)
    chars, (train_ids, valid_ids) = char_corpus([train_text, valid_text])
    b = args.batch // world
    rows = lm_streams(train_ids, args.batch)[rank * b:(rank + 1) * b].to(device)  # my shard

    model = TransformerXL(len(chars), args.d_model, args.heads, args.layers,
                          mem_len=args.mem).to(device, dtype)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    ckpt_path, start, memories = args.out / "checkpoint.pt", 0, None
    if args.resume and ckpt_path.exists():
        ckpt = torch.load(ckpt_path, map_location=device, weights_only=False)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        start = ckpt["step"]
        if ckpt["memories"] is not None:
            memories = [m[rank * b:(rank + 1) * b].to(device, dtype) for m in ckpt["memories"]]
        if rank == 0:
            print(f"resumed from {ckpt_path} at step {start}")
    net = DistributedDataParallel(model) if world > 1 else model

    def checkpoint(step):
        gathered = None if memories is None else gather_memories(memories, world)
        if rank == 0:  # the other ranks took part in the gather and now just go on
            save_checkpoint(ckpt_path, dict(model=model.state_dict(), optimizer=opt.state_dict(),
                                            step=step, memories=gathered, chars=chars,
                                            args=vars(args) | {"out": str(args.out)}))

    t0, loss = time.perf_counter(), torch.tensor(float("nan"))
    for step in range(start, args.steps):
        model.train()
        x, y = lm_segment(rows, step, args.seg)
        logits, memories = net(x, memories)
        loss = lm_loss(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()  # DDP: gradients averaged over ranks here
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if rank == 0 and ((step + 1) % args.log_every == 0 or step + 1 == args.steps):
            tok_s = (step + 1 - start) * args.batch * args.seg / (time.perf_counter() - t0)
            print(f"step {step + 1}/{args.steps}  loss {loss.item() / math.log(2):.3f} bpc "
                  f"(rank 0's shard)  {tok_s:,.0f} tokens/s over {world} process(es)", flush=True)
        if (step + 1) % args.save_every == 0 and step + 1 < args.steps:
            checkpoint(step + 1)
    checkpoint(args.steps)
    result = {"train_bpc": loss.item() / math.log(2)}
    if rank == 0 and args.eval_segments > 0:
        valid = lm_streams(valid_ids, min(args.batch, len(valid_ids) // (2 * args.seg))).to(device)
        result["valid_bpc"] = evaluate_bpc(model, valid, args.seg, args.mem, args.eval_segments)
        print(f"validation: {result['valid_bpc']:.3f} bpc ({args.eval_segments} segments)")
    if world > 1:
        dist.barrier()  # no rank tears gloo down while another is still evaluating: an abort
        dist.destroy_process_group()
    return result


if __name__ == "__main__":
    main()
