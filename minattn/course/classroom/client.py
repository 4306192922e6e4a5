"""The teacher's end of the channel: a `Worker` starts a submission's process in the sandbox
and sends it the calls of the graded functions (plugin.py routes them here).

A call's arguments go to the worker pickled (the worker is the side that unpickles), tensors
beside them as raw bytes; what comes back is decoded by protocol.decode (no pickle). A torch
output that needs gradients is the output of an autograd Function whose backward asks the
worker for the vector-Jacobian product.
"""

from __future__ import annotations

import contextlib
import io
import pickle
import threading
from pathlib import Path

from .protocol import (
    ProtocolError,
    SubmissionError,
    decode,
    encode,
    loaded_torch,
    rebuild_error,
    receive,
    send,
    tensor_bytes,
)
from .sandbox import spawn

# An exercise whose submitted code keeps ending the process gets no more starts (each imports
# torch); the next exercise gets its own: a grade never depends on the order of the tests.
MAX_RESTARTS = 3


class Worker:
    """The teacher's end of the channel: starts the worker on first use, sends calls."""

    def __init__(self, spec: dict):
        self.spec = spec
        self.proc = None
        self.seq = 0
        self.starts: dict[str, int] = {}  # per exercise (plugin.py says which test runs)
        self.exercise = ""
        self.lock = threading.RLock()
        self.errors = b""
        self.fresh = False  # the next call is the first of a new process (it imports)
        self.hung: dict[str, str] = {}  # exercise -> the call that ran past its time limit

    # -- process
    def _start(self):
        if self.exercise in self.hung:  # a hang is not a flaky crash: no second wait
            raise SubmissionError(f"exercise {self.exercise}'s code ran past the time limit of "
                                  f"a call ({self.hung[self.exercise]}); not started again")
        if self.starts.get(self.exercise, 0) >= MAX_RESTARTS:
            raise SubmissionError(f"the submission's process was started {MAX_RESTARTS} times "
                                  f"for exercise {self.exercise or '?'}; not again")
        self.starts[self.exercise] = self.starts.get(self.exercise, 0) + 1
        self.proc = spawn(Path(self.spec["copy"]), self.spec.get("hide", []), self.spec["command"],
                          self.spec["env"], unsafe=self.spec.get("unsafe", False),
                          stdin=-1, stdout=-1, stderr=-1)
        self.errors = b""
        self.fresh = True
        if self.spec.get("pidfile"):  # so that a time limit can end it with the test process
            Path(self.spec["pidfile"]).write_text(str(self.proc.pid))
        threading.Thread(target=self._drain, args=(self.proc,), daemon=True).start()

    def _drain(self, proc):  # keep the last few kB of the worker's stderr, for the message
        for chunk in iter(lambda: proc.stderr.read1(1 << 16), b""):
            self.errors = (self.errors + chunk)[-4000:]

    def _died(self, what: str, ended: bool = False) -> SubmissionError:
        proc, self.proc = self.proc, None
        code = None
        if proc is not None:
            if ended:  # it closed the channel: let it finish exiting, to report its exit code
                with contextlib.suppress(Exception):
                    code = proc.wait(timeout=2)
            if code is None:
                with contextlib.suppress(Exception):
                    proc.kill()
                with contextlib.suppress(Exception):
                    code = proc.wait(timeout=5)
        tail = self.errors.decode(errors="replace").strip().splitlines()[-3:]
        return SubmissionError(f"the submission's process {what}"
                               + (f" (exit code {code})" if code not in (None, -9) else "")
                               + (": " + " | ".join(tail) if tail else ""))

    def close(self):
        """End the worker: its input closes and it returns; killed if it does not within 5 s."""
        if self.proc is not None:
            with contextlib.suppress(Exception):
                self.proc.stdin.close()
            try:
                self.proc.wait(timeout=5)
            except Exception:  # noqa: BLE001 -- a hanging or unkillable-by-EOF worker
                with contextlib.suppress(Exception):
                    self.proc.kill()
                    self.proc.wait(timeout=5)
            self.proc = None

    # -- requests
    def request(self, header: dict, blobs=(), what: str = "a call"):
        """Send one request and wait for its reply: at most the spec's `call_timeout` seconds
        (plus `start_timeout` for the first call of a new process, which imports the
        submission), after which the worker is killed: the hang fails the test that made the
        call and the exercise's later tests, and the other exercises get a process of their
        own."""
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                if self.proc is not None:
                    raise self._died(f"ended before {what}", ended=True)
                self._start()
            self.seq += 1
            limit = self.spec.get("call_timeout")
            if limit and self.fresh:
                limit += self.spec.get("start_timeout", 0)
            proc, overdue, self.fresh = self.proc, threading.Event(), False

            def kill():
                overdue.set()
                with contextlib.suppress(Exception):
                    proc.kill()
            timer = threading.Timer(limit, kill) if limit else None
            if timer is not None:
                timer.daemon = True
                timer.start()
            try:
                send(self.proc.stdin, dict(header, seq=self.seq), blobs)
                reply, rblobs = receive(self.proc.stdout)
            except (EOFError, BrokenPipeError, OSError, ProtocolError) as err:
                if overdue.is_set():
                    self.hung[self.exercise] = f"more than {limit:g} s over {what}"
                    raise self._died(f"took more than {limit:g} s over {what} and was "
                                     "ended") from None
                if isinstance(err, ProtocolError):
                    raise self._died(f"broke the protocol during {what}: {err}") from None
                raise self._died(f"ended during {what}", ended=True) from err
            finally:
                if timer is not None:
                    timer.cancel()
            if overdue.is_set():  # the reply came as the limit ran out: too late, and killed
                self.hung[self.exercise] = f"more than {limit:g} s over {what}"
                raise self._died(f"took more than {limit:g} s over {what} and was ended")
            if reply.get("seq") != self.seq:
                raise self._died(f"answered out of turn during {what}")
            return reply, rblobs

    def forget(self):
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(Exception):
                self.request({"op": "forget"}, what="a clean-up")

    def call(self, module: str, qualname: str, args, kwargs):
        torch = loaded_torch()
        tensors, index = [], {}

        class Pickler(pickle.Pickler):
            def persistent_id(self, obj):
                if torch is not None and isinstance(obj, torch.Tensor):
                    if id(obj) not in index:
                        index[id(obj)] = len(tensors)
                        tensors.append(obj)
                    return ("tensor", index[id(obj)])
                return None
        buffer = io.BytesIO()
        try:
            Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump((args, kwargs))
        except Exception as err:
            raise RuntimeError(f"the grader cannot send the arguments of {qualname} to the "
                               f"submission's process: {err}") from None
        grad = bool(torch is not None and torch.is_grad_enabled())
        meta, blobs = [], [buffer.getvalue()]
        for t in tensors:
            if t.layout != torch.strided:
                raise RuntimeError(f"the grader cannot send a {t.layout} tensor to {qualname}")
            meta.append({"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
                         "device": str(t.device), "grad": bool(grad and t.requires_grad),
                         "param": isinstance(t, torch.nn.Parameter)})
            blobs.append(tensor_bytes(t))
        reply, rblobs = self.request({"op": "call", "module": module, "qualname": qualname,
                                      "tensors": meta, "grad": grad}, blobs, what=qualname)
        if reply.get("op") == "raised":
            raise rebuild_error(reply)
        if reply.get("op") != "ok":
            raise self._died(f"answered {reply.get('op')!r} to a call of {qualname}")
        flagged = []
        try:
            value = decode(reply.get("value"), rblobs, flagged)
        except ProtocolError as err:
            raise SubmissionError(f"{qualname} returned something the grader cannot read: "
                                  f"{err}") from None
        inputs = [t for t, m in zip(tensors, meta) if m["grad"]]
        if not flagged or not inputs or reply.get("handle") is None:
            return value
        flagged.sort(key=lambda p: p[0])
        outs = _Remote.apply(self, reply["handle"], qualname, tuple(inputs),
                             *[t for _, t in flagged])
        swap = {id(old): new for (_, old), new in zip(flagged, outs)}
        return _replace(value, swap)

    def vjp(self, handle: int, qualname: str, grads, inputs):
        blobs = []
        tree = encode(list(grads), blobs)
        reply, rblobs = self.request({"op": "vjp", "handle": handle, "grads": tree}, blobs,
                                     what=f"the backward of {qualname}")
        if reply.get("op") == "raised":
            raise rebuild_error(reply)
        try:
            out = decode(reply.get("value"), rblobs)
        except ProtocolError as err:
            raise SubmissionError(f"the backward of {qualname} returned something the grader "
                                  f"cannot read: {err}") from None
        torch = loaded_torch()
        if not isinstance(out, list) or len(out) != len(inputs):
            count = len(out) if isinstance(out, list) else "?"
            raise SubmissionError(f"the backward of {qualname} gave {count} gradients for "
                                  f"{len(inputs)} inputs")
        result = []
        for g, x in zip(out, inputs):
            if g is not None and (not isinstance(g, torch.Tensor) or g.shape != x.shape):
                raise SubmissionError(f"the backward of {qualname} gave a gradient of the "
                                      "wrong shape")
            result.append(None if g is None else g.to(device=x.device, dtype=x.dtype))
        return result


def _replace(value, swap):
    if id(value) in swap:
        return swap[id(value)]
    if isinstance(value, (tuple, list)):
        return type(value)(_replace(v, swap) for v in value)
    if isinstance(value, dict):
        return {k: _replace(v, swap) for k, v in value.items()}
    return value


def _remote_function():
    import torch

    class Remote(torch.autograd.Function):
        """Outputs the worker computed; their backward is the worker's vector-Jacobian product.
        The differentiable inputs ride along as arguments so that autograd links them."""

        @staticmethod
        def forward(ctx, worker, handle, qualname, n, *tensors):
            inputs, outs = tensors[:n], tensors[n:]
            ctx.worker, ctx.handle, ctx.qualname = worker, handle, qualname
            ctx.save_for_backward(*inputs)
            return tuple(o.detach().clone() for o in outs)

        @staticmethod
        def backward(ctx, *grads):
            inputs = ctx.saved_tensors
            got = ctx.worker.vjp(ctx.handle, ctx.qualname, grads, inputs)
            return (None, None, None, None, *got, *[None] * len(grads))

    return Remote


class _Lazy:
    """torch is imported only when a graded function is called with tensors that need grad."""
    _cls = None

    def apply(self, worker, handle, qualname, inputs, *outs):
        if _Lazy._cls is None:
            _Lazy._cls = _remote_function()
        return _Lazy._cls.apply(worker, handle, qualname, len(inputs), *inputs, *outs)


_Remote = _Lazy()
