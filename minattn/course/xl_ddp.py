"""Train a Transformer-XL language model on characters, alone or under torchrun (DDP).

Lesson 04's training command. It runs in one process, or unchanged in several under `torchrun`,
on one machine or many:

    python -m minattn.course.xl_ddp --data ptb --steps 2000 --out runs/xl            # one process
    python -m minattn.course.xl_ddp --data ptb --steps 4000 --out runs/xl --resume   # continue it
    torchrun --standalone --nproc_per_node=8 -m minattn.course.xl_ddp --data enwik8 --out runs/xl
                                                                     # one node, 8 GPUs (NCCL)
    torchrun --nnodes=2 --nproc_per_node=8 --rdzv_id=xl --rdzv_backend=c10d \
             --rdzv_endpoint=HOST0:29500 -m minattn.course.xl_ddp --data enwik8 --out runs/xl
                                                       # run on every node; HOST0 = first node
    torchrun --standalone --nproc_per_node=2 -m minattn.course.xl_ddp --device cpu ...  # CPU, gloo

How the work is split. The training text is cut into `--batch` contiguous streams (the global
batch, `lm_streams`); with W processes, rank r reads streams r·b … (r+1)·b − 1 (b = batch /
W), one segment of each per step, and carries *those* streams' memory from step to step. DDP
averages the gradients over ranks, so W processes take exactly the steps that one process takes
with the whole global batch (tests/test_xl.py checks this with 2 CPU processes).

Checkpoints. Rank 0 writes `<out>/checkpoint.pt` every `--save-every` steps and at the end,
atomically (a temporary file, then a rename: an interrupted write never leaves half a file).
The memories of every rank are gathered into it, so `--resume` continues exactly where the
run stopped — with any number of processes that divides the batch.

The model attends with the relative-shift kernel (`minattn.fast.xl.rel_attention_fast_torch`).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from ..contract import fail
from ..fast.xl import rel_attention_fast_torch
from ..xl import TransformerXL
from .data import DatasetMissing, load_lm_text
from .xl import char_corpus, evaluate_bpc, lm_loss, lm_segment, lm_streams, synthetic_text


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
    offline fallback of `synthetic_text`."""
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

    model = TransformerXL(len(chars), args.d_model, args.heads, args.layers, mem_len=args.mem,
                          attend=rel_attention_fast_torch).to(device, dtype)
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
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        # Under torchrun, leave without the interpreter's teardown. At the end of a run whose
        # steps and checkpoint were done, a gloo rank now and then aborted ("terminate called
        # without an active exception", from a C++ thread object destroyed while it ran: 2 of
        # about 70 two-process CPU runs, torch 2.13), and torchrun then reported the whole run
        # as failed. Everything is written by now (the checkpoint atomically, the output here).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
