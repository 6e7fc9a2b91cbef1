"""The wire between the trusted runner and the worker: pickle-free, strictly parsed, size-capped.

A frame is ``MAGIC | u32 header length | JSON header | u64 payload length | payload``. The header is
a JSON value in which tensors are ``{"$t": i}`` references to a table of ``dtype``/``shape``/
``offset``/``nbytes``/``device`` entries describing raw little-endian bytes in the payload. Nothing
is ever unpickled or ``torch.load``-ed; every field is checked before it is used (sandbox.md §5).

This module holds the format, its limits and the encoder; the strict parser that reads a frame back
is :mod:`grader.protocol.wireparse`.
"""

from __future__ import annotations

import ctypes
import json
import math
import struct
from typing import Any, BinaryIO, NoReturn

import torch

from grader.protocol.values import HandleRef, View

MAGIC = b"GRW1"
MAX_HEADER = 1 << 20
MAX_PAYLOAD = 512 << 20
MAX_DIMS = 8
MAX_DIM = 1 << 31
MAX_DEPTH = 32
MAX_TENSORS = 4096  # a full model's state_dict and grads fit many times over
DTYPES = {
    name: getattr(torch, name)
    for name in (
        "float16",
        "bfloat16",
        "float32",
        "float64",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "bool",
    )
}
_NAMES = {v: k for k, v in DTYPES.items()}


# one encoder for every frame: json.dumps with options builds a fresh one per call
_HEADER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


class WireError(ValueError):
    """A frame that does not parse, breaks a limit, or uses an unknown type."""


# -- encoding ---------------------------------------------------------------------------------
def encode(value: object) -> bytearray:
    """One frame holding ``value`` (plain values only: see :mod:`grader.protocol.values`), built in
    one buffer: each tensor's bytes are copied once, straight from its memory (a state dict of 10
    MB was copied three times, each into fresh pages)."""
    table: list[dict[str, Any]] = []
    tensors: list[torch.Tensor] = []
    offset = [0]
    tree = _enc(value, table, tensors, offset, 0)
    header = _HEADER.encode({"v": tree, "t": table}).encode()
    # spaces after the JSON, so that the payload starts 16-byte aligned in the frame: the parser
    # then reads big tensors where they lie (wireparse.IN_PLACE_MIN)
    header += b" " * (-(16 + len(header)) % 16)
    if len(header) > MAX_HEADER or offset[0] > MAX_PAYLOAD:
        raise WireError(f"frame too large (header {len(header)} B, payload {offset[0]} B)")
    start = 16 + len(header)
    frame = bytearray(start + offset[0])
    frame[:8] = MAGIC + struct.pack("<I", len(header))
    frame[8:start] = header + struct.pack("<Q", offset[0])
    for entry, data in zip(table, tensors, strict=True):
        if entry["nbytes"]:  # no numpy needed: a contiguous CPU tensor's bytes, from its address
            place = ctypes.c_char.from_buffer(frame, start + entry["offset"])
            ctypes.memmove(ctypes.addressof(place), data.data_ptr(), entry["nbytes"])
    return frame


def _enc(
    value: object,
    table: list[dict[str, Any]],
    tensors: list[torch.Tensor],
    offset: list[int],
    depth: int,
) -> object:
    if depth > MAX_DEPTH:
        raise WireError("value nested too deep")
    if value is None or type(value) in (bool, int, str):
        return value
    if type(value) is float:
        return value if math.isfinite(value) else {"$f": str(value)}
    if isinstance(value, torch.Tensor):
        return {"$t": _enc_tensor(value, table, tensors, offset)}
    if isinstance(value, HandleRef):
        return {"$h": [value.id, value.class_name]}
    if type(value) is View:
        return {
            "$v": [
                {"$t": _enc_tensor(value.base, table, tensors, offset)},
                None if value.permute is None else list(value.permute),
                None if value.narrow is None else list(value.narrow),
                value.share,
            ]
        }
    if isinstance(value, torch.dtype):
        return {"$d": _NAMES.get(value) or fail(f"dtype {value} cannot cross")}
    if isinstance(value, torch.device):
        return {"$dev": str(value)}
    if isinstance(value, tuple):
        return {"$tu": [_enc(v, table, tensors, offset, depth + 1) for v in value]}
    if isinstance(value, list):
        return [_enc(v, table, tensors, offset, depth + 1) for v in value]
    if isinstance(value, dict):
        return {"$m": [[k, _enc(v, table, tensors, offset, depth + 1)] for k, v in value.items()]}
    raise WireError(f"cannot encode a value of type {type(value).__name__}")


def _enc_tensor(
    t: torch.Tensor, table: list[dict[str, Any]], tensors: list[torch.Tensor], offset: list[int]
) -> int:
    """An entry for ``t``; its contiguous CPU form is kept (alive) until :func:`encode` copies
    it."""
    name = _NAMES.get(t.dtype)
    if name is None:
        raise WireError(f"tensor dtype {t.dtype} cannot cross")
    if t.is_cpu:  # most tensors: no device name to format, no move to make
        device, data = "cpu", t.detach().contiguous()
    else:
        device, data = str(t.device), t.detach().to("cpu").contiguous()
    nbytes = data.nbytes
    table.append(
        {
            "dtype": name,
            "shape": list(t.shape),
            "offset": offset[0],
            "nbytes": nbytes,
            "device": device,
        }
    )
    tensors.append(data)
    offset[0] += nbytes
    return len(table) - 1


def fail(message: str) -> NoReturn:
    """Raise :class:`WireError`: for the places an expression must do it (both the encoder and the
    parser)."""
    raise WireError(message)


# -- framing on a stream ----------------------------------------------------------------------
def write_frame(stream: BinaryIO, value: object) -> None:
    stream.write(encode(value))
    stream.flush()
