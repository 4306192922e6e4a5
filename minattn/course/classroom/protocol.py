"""The wire between the grader's test process and a submission's worker: messages and values.

A message is an 8-byte length, a 4-byte header length, a JSON header and raw blobs (`send`,
`receive`). A value travels as a JSON tree plus blobs (`encode`, `decode`): None, bools,
numbers, strings, tuples/lists/dicts/sets of them, NumPy arrays and scalars of numeric dtypes,
torch tensors of numeric dtypes; `decode` checks every field of a tree that may come from
anyone, and never unpickles. An exception in the worker comes back as its type name and
message (`rebuild_error`). plugin.py states the threat model.
"""

from __future__ import annotations

import json
import re
import struct
import sys

MAX_MESSAGE = 256 << 20  # bytes; a reply larger than this fails the call
MAX_DEPTH = 32
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
def loaded_torch():
    """torch if this process imported it, else None (a value never imports it)."""
    return sys.modules.get("torch")


def tensor_bytes(t) -> bytes:
    torch = loaded_torch()
    t = t.detach().to("cpu").contiguous().reshape(-1)
    return bytes(t.view(torch.uint8).numpy()) if t.numel() else b""


def encode(value, blobs: list, flagged: list | None = None, depth: int = 0):
    """A value as a JSON-able tree plus raw blobs. Tensors that require grad are appended to
    `flagged` (when given) and their tree entry says which one they are."""
    import numpy as np

    if depth > MAX_DEPTH:
        raise TypeError("a value nested too deeply")
    torch = loaded_torch()
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
        return ["dict", [[encode(k, blobs, flagged, depth + 1),
                          encode(v, blobs, flagged, depth + 1)] for k, v in value.items()]]
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
        blobs.append(tensor_bytes(value))
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
            torch = loaded_torch()
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


def rebuild_error(reply) -> BaseException:
    name, message = str(reply.get("type", "?"))[:100], str(reply.get("message", ""))[:2000]
    where = str(reply.get("where", ""))[:300]
    if name in REBUILT:
        return REBUILT[name](message)
    return SubmissionError(f"{name}: {message}" + (f" ({where})" if where else ""))
