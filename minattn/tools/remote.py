"""Grading in two processes: the teacher's tests in one, the student's functions in another.

The grader (tools/grading.py) runs pytest on a copy of the *teacher's* repository with this
module as a plugin (`-p minattn.tools.remote --remote-specs specs.json`). pytest collects the
tests once; then, for each submission, a forked process replaces the code of every function
that holds a region of a graded exercise (the function and its twins: the same set that
`exercise_audit.stub_in_process` stubs) by a trampoline and runs the tests: a call
sends the arguments to a *worker* process that imports the submission's `minattn/` and runs
the student's version there, in the sandbox of tools/sandbox.py; the values it returns come
back and the teacher's test goes on with them. Gradients flow back through the same channel:
a torch output that needs them is the output of an autograd Function whose backward asks the
worker for the vector-Jacobian product.

Threat model. The student controls every byte their functions compute, and can run any code
in the worker: patch numpy.testing or pytest, register atexit hooks, skip, exit, hang, fork,
print, write files, read its own copy, or talk the wire protocol itself. None of it reaches a
verdict, because:
- the verdict is pytest's outcome in the teacher's process, which never imports or runs the
  submission's code; it writes the report to a folder the worker cannot see (the grader then
  reads that report, never anything the worker wrote);
- what comes back from the worker is decoded by a small parser (no pickle): None, bools,
  numbers, strings, tuples/lists/dicts/sets of them, NumPy arrays and scalars of numeric
  dtypes, torch tensors of numeric dtypes; anything else, a malformed or oversized message,
  a wrong reply id, fails the test that made the call;
- an exception in the worker comes back as its type name and message: a few built-in types
  (ValueError, TypeError, NotImplementedError, ...) are raised again as themselves, so that
  the teacher's `pytest.raises` still works, and everything else, pytest's skip and exit
  included, as SubmissionError: a failure, never a skip;
- a worker that dies or breaks the protocol fails the calling test and is restarted for the
  next (at most MAX_RESTARTS starts in all; later calls fail); a worker that hangs is ended
  by the grader's time limit (the whole process group).
What the student *can* do is what a student's function can always do: return any value for
any input (so the teacher's tests, not this channel, decide what is right) and read its own
copy (which holds only the library, no tests, and no teacher solution of a graded exercise).
Arguments go from the teacher to the worker pickled (the worker is the side that unpickles),
tensors beside them as raw bytes.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import pickle
import re
import struct
import sys
import threading
import traceback
from pathlib import Path

MAX_MESSAGE = 256 << 20  # bytes; a reply larger than this fails the call
MAX_DEPTH = 32
MAX_RESTARTS = 3  # a submission whose process keeps ending gets no more (each start imports torch)
# Exceptions raised again as themselves in the teacher's process (with the worker's message).
REBUILT = {e.__name__: e for e in (
    ValueError, TypeError, IndexError, KeyError, RuntimeError, NotImplementedError,
    ZeroDivisionError, ArithmeticError, FloatingPointError, OverflowError, LookupError,
    AttributeError, AssertionError, MemoryError)}
NUMPY_DTYPE = re.compile(r"^[<>|=][biufc]\d{1,2}$")
TORCH_DTYPES = ("float64", "float32", "float16", "bfloat16", "complex64", "complex128", "int64",
                "int32", "int16", "int8", "uint8", "bool")
DEVICE = re.compile(r"^(cpu|cuda(:\d{1,2})?|mps(:\d{1,2})?)$")


class SubmissionError(Exception):
    """What the submission's code raised (anything not in REBUILT), or how its process failed."""


class ProtocolError(Exception):
    """A message that does not follow the protocol."""


# ============================================================================ framing
def send(stream, header: dict, blobs=()) -> None:
    """One message: 8-byte length, 4-byte header length, JSON header, the blobs."""
    blobs = [bytes(b) if not isinstance(b, (bytes, bytearray, memoryview)) else b for b in blobs]
    head = json.dumps(dict(header, blobs=[len(b) for b in blobs]), allow_nan=False).encode()
    total = 4 + len(head) + sum(len(b) for b in blobs)
    stream.write(struct.pack(">QI", total, len(head)))
    stream.write(head)
    for b in blobs:
        stream.write(b)
    stream.flush()


def _read_exactly(stream, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = stream.read(left)
        if not chunk:
            raise EOFError("the other process closed the channel")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def receive(stream, limit: int = MAX_MESSAGE) -> tuple[dict, list[bytes]]:
    total, head_len = struct.unpack(">QI", _read_exactly(stream, 12))
    if total > limit or head_len > total - 4 or head_len > 16 << 20:
        raise ProtocolError(f"a message of {total} bytes (the limit is {limit})")
    head = _read_exactly(stream, head_len)
    try:
        header = json.loads(head)
        sizes = header.pop("blobs")
    except (ValueError, AttributeError, KeyError) as err:
        raise ProtocolError(f"a malformed header ({err})") from None
    if (not isinstance(sizes, list) or not all(type(s) is int and s >= 0 for s in sizes)
            or 4 + head_len + sum(sizes) != total):
        raise ProtocolError("blob sizes that do not add up")
    return header, [_read_exactly(stream, s) for s in sizes]


# ============================================================================ values
def _torch():
    return sys.modules.get("torch")


def _tensor_bytes(t) -> bytes:
    torch = _torch()
    t = t.detach().to("cpu").contiguous().reshape(-1)
    return bytes(t.view(torch.uint8).numpy()) if t.numel() else b""


def encode(value, blobs: list, flagged: list | None = None, depth: int = 0):
    """A value as a JSON-able tree plus raw blobs. Tensors that require grad are appended to
    `flagged` (when given) and their tree entry says which one they are."""
    import numpy as np

    if depth > MAX_DEPTH:
        raise TypeError("a value nested too deeply")
    torch = _torch()
    if isinstance(value, np.generic):  # before float: np.float64 is a float too
        array = np.asarray(value)
        if array.dtype.kind not in "biufc":
            raise TypeError(f"a NumPy scalar of dtype {array.dtype}")
        blobs.append(array.tobytes())
        return ["npscalar", array.dtype.str, [], len(blobs) - 1]
    if value is None or isinstance(value, (bool, str)):
        return ["v", value]
    if isinstance(value, int) and not isinstance(value, bool):
        return ["int", str(value)]
    if isinstance(value, float):
        return ["float", repr(value)]
    if isinstance(value, complex):
        return ["complex", repr(value.real), repr(value.imag)]
    if isinstance(value, (tuple, list, set, frozenset)):
        kind = {tuple: "tuple", list: "list", set: "set", frozenset: "frozenset"}
        tag = next((v for k, v in kind.items() if isinstance(value, k)), "tuple")
        return [tag, [encode(v, blobs, flagged, depth + 1) for v in value]]
    if isinstance(value, dict):
        return ["dict", [[encode(k, blobs, flagged, depth + 1), encode(v, blobs, flagged, depth + 1)]
                         for k, v in value.items()]]
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biufc":
            raise TypeError(f"an array of dtype {value.dtype} (only numbers and bools come back)")
        blobs.append(np.ascontiguousarray(value).tobytes())
        return ["np", value.dtype.str, list(value.shape), len(blobs) - 1]
    if torch is not None and isinstance(value, torch.Tensor):
        if value.layout != torch.strided:
            raise TypeError(f"a tensor with layout {value.layout}")
        dtype = str(value.dtype).removeprefix("torch.")
        if dtype not in TORCH_DTYPES:
            raise TypeError(f"a tensor of dtype {dtype}")
        blobs.append(_tensor_bytes(value))
        flag = -1
        if flagged is not None and value.requires_grad:
            flagged.append(value)
            flag = len(flagged) - 1
        return ["tensor", dtype, list(value.shape), str(value.device), len(blobs) - 1, flag]
    raise TypeError(f"a value of type {type(value).__module__}.{type(value).__qualname__} "
                    "(only numbers, strings, arrays, tensors and tuples, lists, dicts and sets "
                    "of them can come back)")


def _shape(shape) -> tuple[int, ...]:
    if not isinstance(shape, list) or len(shape) > 32 or not all(
            type(s) is int and 0 <= s < 1 << 40 for s in shape):
        raise ProtocolError(f"a bad shape {shape!r}")
    return tuple(shape)


def _blob(blobs, index, nbytes: int) -> bytes:
    if type(index) is not int or not 0 <= index < len(blobs):
        raise ProtocolError("a bad blob index")
    if len(blobs[index]) != nbytes:
        raise ProtocolError(f"an array of {len(blobs[index])} bytes where {nbytes} were expected")
    return blobs[index]


def decode(tree, blobs: list[bytes], flagged: list | None = None, depth: int = 0):
    """The inverse of encode, for a tree that may come from anyone: only the types encode
    writes, every field checked. Tensors flagged as needing grad are appended to `flagged`
    as (index, tensor)."""
    import numpy as np

    if depth > MAX_DEPTH or not isinstance(tree, list) or not tree or not isinstance(tree[0], str):
        raise ProtocolError("a malformed value")
    tag, rest = tree[0], tree[1:]

    def sub(items):
        if not isinstance(items, list):
            raise ProtocolError("a malformed container")
        return [decode(t, blobs, flagged, depth + 1) for t in items]
    try:
        if tag == "v" and len(rest) == 1 and (rest[0] is None or isinstance(rest[0], (bool, str))):
            return rest[0]
        if tag == "int" and len(rest) == 1 and isinstance(rest[0], str) and len(rest[0]) < 5000:
            return int(rest[0])
        if tag == "float" and len(rest) == 1 and isinstance(rest[0], str):
            return float(rest[0])
        if tag == "complex" and len(rest) == 2:
            return complex(float(rest[0]), float(rest[1]))
        if tag in ("tuple", "list", "set", "frozenset") and len(rest) == 1:
            items = sub(rest[0])
            return {"tuple": tuple, "list": list, "set": set, "frozenset": frozenset}[tag](items)
        if tag == "dict" and len(rest) == 1 and isinstance(rest[0], list):
            out = {}
            for pair in rest[0]:
                if not isinstance(pair, list) or len(pair) != 2:
                    raise ProtocolError("a malformed dict")
                key, value = sub(pair)
                out[key] = value
            return out
        if tag in ("np", "npscalar") and len(rest) == 3:
            dtype, shape, index = rest
            if not isinstance(dtype, str) or not NUMPY_DTYPE.match(dtype):
                raise ProtocolError(f"a bad dtype {dtype!r}")
            dtype, shape = np.dtype(dtype), _shape(shape)
            count = int(np.prod(shape, dtype=np.int64))
            data = _blob(blobs, index, count * dtype.itemsize)
            array = np.frombuffer(data, dtype=dtype, count=count).reshape(shape).copy()
            return array if tag == "np" else array[()]
        if tag == "tensor" and len(rest) == 5:
            torch = _torch()
            if torch is None:
                import torch
            dtype, shape, device, index, flag = rest
            if dtype not in TORCH_DTYPES or not isinstance(device, str) or not DEVICE.match(device):
                raise ProtocolError(f"a bad tensor dtype or device {dtype!r} {device!r}")
            dt, shape = getattr(torch, dtype), _shape(shape)
            count = int(np.prod(shape, dtype=np.int64))
            data = _blob(blobs, index, count * dt.itemsize)
            t = (torch.frombuffer(bytearray(data), dtype=dt).reshape(shape) if count
                 else torch.empty(shape, dtype=dt))
            if device != "cpu":
                t = t.to(device)
            if flagged is not None and type(flag) is int and flag >= 0:
                flagged.append((flag, t))
            return t
    except ProtocolError:
        raise
    except (ValueError, TypeError, OverflowError, MemoryError, RuntimeError) as err:
        raise ProtocolError(f"a malformed {tag} ({err})") from None
    raise ProtocolError(f"an unknown value tag {tag!r}")


# ============================================================================ which functions
def holders(ids, root: Path, nested: list | None = None) -> list[tuple[str, str]]:
    """(module, qualified name) of every top-level function or method holding a region of the
    exercises `ids`: the functions whose calls go to the worker. A region inside a nested
    function (a closure such as a FlexAttention mask_mod) cannot be called apart: its exercise
    id is appended to `nested` (the grader stubs it in the teacher's process: such a region is
    never graded from the teacher's solution). A region outside any function: ValueError."""
    from .exercises import all_exercises

    found = []
    by_file: dict[str, list] = {}
    for e in all_exercises(root):
        if e.id in ids:
            by_file.setdefault(str(e.path), []).append(e)
    for rel, regions in sorted(by_file.items()):
        tree = ast.parse((Path(root) / rel).read_text())
        module = ".".join(Path(rel).with_suffix("").parts).removesuffix(".__init__")
        for e in regions:
            chain, node = [], tree
            while True:
                inner = next((c for c in ast.iter_child_nodes(node)
                              if isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                              and c.lineno <= e.line <= c.end_lineno), None)
                if inner is None:
                    break
                chain.append(inner)
                node = inner
            functions = [c for c in chain if not isinstance(c, ast.ClassDef)]
            if not functions:
                raise ValueError(f"{rel}:{e.line}: exercise {e.id}'s region is not inside a "
                                 "function; the grader can only run functions apart")
            if len(functions) > 1 or isinstance(chain[-1], ast.ClassDef):
                if nested is not None and e.id not in nested:
                    nested.append(e.id)
                continue
            qualname = ".".join(c.name for c in chain)
            if (module, qualname) not in found:
                found.append((module, qualname))
    return found


def resolve(module: str, qualname: str):
    """The plain function object `module.qualname` (a function or a method)."""
    import importlib

    obj = importlib.import_module(module)
    parts = qualname.split(".")
    for part in parts[:-1]:
        obj = getattr(obj, part)
    fn = vars(obj).get(parts[-1]) if isinstance(obj, type) else getattr(obj, parts[-1])
    fn = getattr(fn, "__func__", fn)  # staticmethod / classmethod
    if not hasattr(fn, "__code__"):
        raise ValueError(f"{module}.{qualname} is not a plain function")
    return fn


def _trampoline(fn, module: str, qualname: str):
    """A code object for `fn` that sends every call to the worker."""
    free = fn.__code__.co_freevars
    body = [f"def {fn.__name__}(*args, **kwargs):"]
    if free:
        body.append("    (" + ", ".join(free) + ",)")
    body.append(f"    return __minattn_remote_call__({module!r}, {qualname!r}, args, kwargs)")
    source = "\n".join(body)
    if free:
        source = ("def _outer():\n" + "".join(f"    {v} = None\n" for v in free)
                  + "\n".join("    " + line for line in body) + f"\n    return {fn.__name__}\n")
    code = compile(source, fn.__code__.co_filename, "exec")
    inner = next(c for c in code.co_consts if hasattr(c, "co_code"))
    if free:
        inner = next(c for c in inner.co_consts if hasattr(c, "co_code"))
    if inner.co_freevars != free:
        raise ValueError(f"cannot stand in for {module}.{qualname} (closure {free})")
    return inner.replace(co_name=fn.__code__.co_name, co_qualname=fn.__code__.co_qualname,
                         co_firstlineno=fn.__code__.co_firstlineno)


# ============================================================================ teacher's side
class Worker:
    """The teacher's end of the channel: starts the worker on first use, sends calls."""

    def __init__(self, spec: dict):
        self.spec = spec
        self.proc = None
        self.seq = 0
        self.starts = 0
        self.lock = threading.RLock()
        self.errors = b""

    # -- process
    def _start(self):
        from .sandbox import spawn

        if self.starts >= MAX_RESTARTS:
            raise SubmissionError(f"the submission's process was started {MAX_RESTARTS} times; "
                                  "not again")
        self.starts += 1
        self.proc = spawn(Path(self.spec["copy"]), self.spec.get("hide", []), self.spec["command"],
                          self.spec["env"], unsafe=self.spec.get("unsafe", False),
                          stdin=-1, stdout=-1, stderr=-1)
        self.errors = b""
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
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                if self.proc is not None:
                    raise self._died(f"ended before {what}", ended=True)
                self._start()
            self.seq += 1
            try:
                send(self.proc.stdin, dict(header, seq=self.seq), blobs)
                reply, rblobs = receive(self.proc.stdout)
            except (EOFError, BrokenPipeError, OSError) as err:
                raise self._died(f"ended during {what}", ended=True) from err
            except ProtocolError as err:
                raise self._died(f"broke the protocol during {what}: {err}") from None
            if reply.get("seq") != self.seq:
                raise self._died(f"answered out of turn during {what}")
            return reply, rblobs

    def forget(self):
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(Exception):
                self.request({"op": "forget"}, what="a clean-up")

    def call(self, module: str, qualname: str, args, kwargs):
        torch = _torch()
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
            blobs.append(_tensor_bytes(t))
        reply, rblobs = self.request({"op": "call", "module": module, "qualname": qualname,
                                      "tensors": meta, "grad": grad}, blobs, what=qualname)
        if reply.get("op") == "raised":
            raise _rebuild(reply)
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
        outs = _Remote.apply(self, reply["handle"], qualname, tuple(inputs), *[t for _, t in flagged])
        swap = {id(old): new for (_, old), new in zip(flagged, outs)}
        return _replace(value, swap)

    def vjp(self, handle: int, qualname: str, grads, inputs):
        blobs = []
        tree = encode(list(grads), blobs)
        reply, rblobs = self.request({"op": "vjp", "handle": handle, "grads": tree}, blobs,
                                     what=f"the backward of {qualname}")
        if reply.get("op") == "raised":
            raise _rebuild(reply)
        try:
            out = decode(reply.get("value"), rblobs)
        except ProtocolError as err:
            raise SubmissionError(f"the backward of {qualname} returned something the grader "
                                  f"cannot read: {err}") from None
        torch = _torch()
        if not isinstance(out, list) or len(out) != len(inputs):
            count = len(out) if isinstance(out, list) else "?"
            raise SubmissionError(f"the backward of {qualname} gave {count} gradients for "
                                  f"{len(inputs)} inputs")
        result = []
        for g, x in zip(out, inputs):
            if g is not None and (not isinstance(g, torch.Tensor) or g.shape != x.shape):
                raise SubmissionError(f"the backward of {qualname} gave a gradient of the wrong shape")
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


def _rebuild(reply) -> BaseException:
    name, message = str(reply.get("type", "?"))[:100], str(reply.get("message", ""))[:2000]
    where = str(reply.get("where", ""))[:300]
    if name in REBUILT:
        return REBUILT[name](message)
    return SubmissionError(f"{name}: {message}" + (f" ({where})" if where else ""))


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


# ============================================================================ the plugin
_WORKER: Worker | None = None
_SWAPPED: list = []


def install(spec: dict, root: Path) -> list[tuple[str, str]]:
    """Route every call of the graded exercises' functions (in this process) to a worker."""
    global _WORKER
    _WORKER = Worker(spec)

    def remote_call(module, qualname, args, kwargs):
        return _WORKER.call(module, qualname, args, kwargs)

    nested: list[str] = []
    routed = holders(set(spec["ids"]), root, nested)
    from .exercise_audit import stub_in_process

    for ex_id in nested:  # closures cannot travel: their regions are stubs here, never the key
        stub_in_process(ex_id, root)
    for module, qualname in routed:
        fn = resolve(module, qualname)
        fn.__globals__["__minattn_remote_call__"] = remote_call
        _SWAPPED.append((fn, fn.__code__))
        fn.__code__ = _trampoline(fn, module, qualname)
    return routed


def pytest_addoption(parser):
    parser.addoption("--remote-specs", default=None,
                     help="(grading) JSON file: one worker spec per submission; the tests run "
                          "once per submission, each run in a process forked after collection")


def pytest_runtestloop(session):  # a -p plugin: called before pytest's own loop
    """Collect once (the teacher's code only: the count of tests is the teacher's), then for
    each submission fork a process that routes the graded functions to that submission's
    worker and runs the tests, writing its own report; at most `timeout` seconds each, after
    which it and its worker are killed. The forked runs share what collection imported (torch
    is imported once per grading, not once per submission)."""
    path = session.config.getoption("--remote-specs")
    if not path:
        return None
    import minattn

    root = Path(minattn.__file__).resolve().parents[1]
    for entry in json.loads(Path(path).read_text()):
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _run_forked(session, entry, root)
        status = _wait(pid, entry)
        Path(entry["status"]).write_text(json.dumps(status))
    return True


def _run_forked(session, entry: dict, root: Path) -> None:
    """In the forked process: this submission's run, then exit (never back into pytest)."""
    from _pytest.main import pytest_runtestloop as run_tests

    code = 3
    try:
        session.config.option.exercise_report = entry["report"]
        install(entry, root)
        run_tests(session)
        code = 1 if session.testsfailed else 0
    except BaseException:  # noqa: BLE001 -- the grader reads the exit code
        traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            if _WORKER is not None:
                _WORKER.close()
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _wait(pid: int, entry: dict) -> dict:
    import signal
    import time

    deadline = time.monotonic() + float(entry["timeout"])
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return {"rc": os.waitstatus_to_exitcode(status), "timed_out": False}
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    for victim in [pid] + [int(p) for p in [_read(entry.get("pidfile"))] if p.isdigit()]:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(victim, signal.SIGKILL)
    os.waitpid(pid, 0)
    return {"rc": -9, "timed_out": True}


def _read(path) -> str:
    try:
        return Path(path).read_text().strip() if path else ""
    except OSError:
        return ""


def pytest_runtest_teardown(item, nextitem):
    if _WORKER is not None:
        _WORKER.forget()  # the autograd graphs of this test


def pytest_unconfigure(config):
    if _WORKER is not None:
        _WORKER.close()


# ============================================================================ worker's side
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
            torch = _torch()
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
            where = next((f"{Path(f.filename).name}:{f.lineno} in {f.name}" for f in reversed(frames)
                          if "minattn" in f.filename and "tools" not in f.filename), "")
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
