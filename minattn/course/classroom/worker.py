"""The worker's end of the channel: runs in the sandbox, imports the submission's graded
`minattn/`, and answers the teacher's process: a call of a graded function, a backward, a
clean-up. Started by client.Worker as `python -c "from minattn.course.classroom.worker import serve;
serve()"`.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import sys
import traceback
from pathlib import Path

from .protocol import ProtocolError, decode, encode, loaded_torch, receive, send
from .stubs import resolve


def serve(stdin=None, stdout=None) -> None:
    """The worker's loop: read a request, run it, answer. Python's own stdout goes to stderr
    so that a print in the student's code cannot garble the channel by accident."""
    stdin = stdin or os.fdopen(os.dup(0), "rb", buffering=0)
    if stdout is None:
        stdout = os.fdopen(os.dup(1), "wb")
        os.dup2(2, 1)
        sys.stdout = sys.stderr
    graphs: dict[int, tuple] = {}
    next_handle = 0
    while True:
        try:
            header, blobs = receive(stdin)
        except EOFError:
            return
        seq, op = header.get("seq"), header.get("op")
        try:
            if op == "forget":
                graphs.clear()
                send(stdout, {"op": "ok", "seq": seq, "value": ["v", None]})
                continue
            if op == "vjp":
                import torch

                inputs, outputs = graphs[header["handle"]]
                grads = decode(header["grads"], blobs)
                pairs = [(o, g) for o, g in zip(outputs, grads) if g is not None]
                got = (torch.autograd.grad([o for o, _ in pairs], inputs, [g for _, g in pairs],
                                           allow_unused=True, retain_graph=True)
                       if pairs else [None] * len(inputs))
                out = []
                tree = encode(list(got), out)
                send(stdout, {"op": "ok", "seq": seq, "value": tree}, out)
                continue
            if op != "call":
                raise ProtocolError(f"unknown request {op!r}")
            tensors = [_rebuild_tensor(m, b) for m, b in zip(header["tensors"], blobs[1:])]

            class Unpickler(pickle.Unpickler):
                def persistent_load(self, pid):
                    return tensors[pid[1]]
            args, kwargs = Unpickler(io.BytesIO(blobs[0])).load()
            fn = resolve(header["module"], header["qualname"])
            grad = bool(header.get("grad"))
            torch = loaded_torch()
            mode = torch.set_grad_enabled(grad) if torch is not None else contextlib.nullcontext()
            with mode:
                value = fn(*args, **kwargs)
            out, flagged = [], []
            tree = encode(value, out, flagged if grad else None)
            handle = None
            leaves = [t for t, m in zip(tensors, header["tensors"]) if m.get("grad")]
            if flagged and leaves:
                next_handle += 1
                handle = next_handle
                graphs[handle] = (leaves, flagged)
            send(stdout, {"op": "ok", "seq": seq, "value": tree, "handle": handle}, out)
        except BaseException as err:  # noqa: BLE001 -- skip, exit, anything: a failure
            frames = traceback.extract_tb(err.__traceback__)
            where = next((f"{Path(f.filename).name}:{f.lineno} in {f.name}"
                          for f in reversed(frames)
                          if "minattn" in f.filename and "classroom" not in f.filename), "")
            try:
                send(stdout, {"op": "raised", "seq": seq, "type": type(err).__name__,
                              "message": str(err)[:2000], "where": where})
            except Exception:
                return


def _rebuild_tensor(meta: dict, data: bytes):
    import numpy as np
    import torch

    dtype = getattr(torch, meta["dtype"])
    shape = tuple(meta["shape"])
    count = int(np.prod(shape, dtype=np.int64))
    t = (torch.frombuffer(bytearray(data), dtype=dtype).reshape(shape) if count
         else torch.empty(shape, dtype=dtype))
    if meta["device"] != "cpu":
        t = t.to(meta["device"])
    grad = bool(meta.get("grad")) and (t.is_floating_point() or t.is_complex())
    if meta.get("param"):
        return torch.nn.Parameter(t, requires_grad=grad)
    return t.requires_grad_(grad)
