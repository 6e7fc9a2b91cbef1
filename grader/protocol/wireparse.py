"""The wire's strict parser: a frame, from bytes or from a stream, back into plain values
(:mod:`wire`).

Kept apart from :mod:`grader.protocol.wire` (the format, its limits and the encoder) because this is
the side that reads what the other side of the wall wrote: every field is checked before it is used,
tensors are materialised lazily from the frame's own bytes, and anything unexpected is a
:class:`~wire.WireError`. Nothing is ever unpickled or ``torch.load``-ed (sandbox.md §5).
"""

from __future__ import annotations

import ctypes
import json
import math
import struct
from typing import Any, BinaryIO

import torch

from grader.protocol.values import HandleRef, ValueRejected, View, checked_view
from grader.protocol.wire import (
    DTYPES,
    MAGIC,
    MAX_DEPTH,
    MAX_DIM,
    MAX_DIMS,
    MAX_HEADER,
    MAX_PAYLOAD,
    MAX_TENSORS,
    WireError,
    fail,
)

IN_PLACE_MIN = 1 << 20  # a tensor this big is read where it lies in a frame (when 16-byte aligned)
_SPECIAL_FLOATS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
_HEADER_KEYS = frozenset({"v", "t"})
_ENTRY_KEYS = frozenset({"dtype", "shape", "offset", "nbytes", "device"})
_SCALARS = frozenset({bool, int, float, str})
# every device name a frame may carry, as torch itself spells it (checked by a lookup, not parsed)
_DEVICE_NAMES = frozenset({"cpu", "cuda", *(f"cuda:{i}" for i in range(16))})


def decode(
    frame: bytes | bytearray, *, max_payload: int = MAX_PAYLOAD, allow_cuda: bool = False
) -> Any:
    """Parse one complete frame; raise :class:`WireError` on anything unexpected.

    Every tensor is decoded to CPU: ``allow_cuda`` (the worker reading the runner's requests, never
    the runner reading a worker's reply) places tensors on the device their entry names instead.
    Any failure while parsing, a ``MemoryError`` or ``RecursionError`` included, is a ``WireError``.
    A big tensor may share a writable frame's memory (:data:`IN_PLACE_MIN`): the caller hands over a
    buffer it no longer writes to (every caller reads each frame into a fresh one).
    """
    try:
        return _decode(frame, max_payload, allow_cuda)
    except WireError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever a hostile frame provokes is a protocol error
        raise WireError(f"frame could not be decoded ({type(exc).__name__})") from None


def _decode(frame: bytes | bytearray, max_payload: int, allow_cuda: bool) -> Any:
    if len(frame) < 16 or frame[:4] != MAGIC:
        raise WireError("bad magic or short frame")
    (hlen,) = struct.unpack_from("<I", frame, 4)
    if hlen > MAX_HEADER or 8 + hlen + 8 > len(frame):
        raise WireError(f"header length {hlen} out of bounds")
    (plen,) = struct.unpack_from("<Q", frame, 8 + hlen)
    payload = memoryview(frame)[16 + hlen :]
    if plen > max_payload or plen != len(payload):
        raise WireError(
            f"payload length {plen} does not match the frame ({len(payload)} bytes follow)"
        )
    try:
        header = json.loads(frame[8 : 8 + hlen].decode("utf-8"))
    except (ValueError, RecursionError, UnicodeDecodeError) as exc:
        raise WireError(f"header is not valid JSON: {type(exc).__name__}") from None
    if type(header) is not dict or header.keys() != _HEADER_KEYS or type(header["t"]) is not list:
        raise WireError("header must be an object with exactly 'v' and 't'")
    table = _check_table(header["t"], len(payload))
    tensors = _Tensors(table, payload, allow_cuda)
    value = _dec(header["v"], tensors, 0)
    if len(tensors.used) != len(table):
        raise WireError(
            f"{len(table) - len(tensors.used)} tensor table entries are never referenced"
        )
    return value


class _Tensors:
    """The tensor table, materialised lazily: an entry is decoded when the value tree reaches it,
    once."""

    def __init__(
        self,
        table: list[tuple[torch.dtype, list[int], int, int, str]],
        payload: memoryview,
        allow_cuda: bool,
    ) -> None:
        self.table, self.payload, self.allow_cuda = table, payload, allow_cuda
        self.used: set[int] = set()

    def get(self, index: object) -> torch.Tensor:
        if type(index) is not int or not 0 <= index < len(self.table):
            raise WireError(f"tensor reference {index!r} outside the table")
        if index in self.used:
            raise WireError(f"tensor {index} referenced twice")
        self.used.add(index)
        dtype, shape, offset, nbytes, device = self.table[index]
        if not nbytes:
            tensor = torch.empty(shape, dtype=dtype)
        elif nbytes >= IN_PLACE_MIN and _aligned(self.payload, offset):
            # a big tensor stays where it was read, in the frame (which it keeps alive): its copy
            # was most of decoding a 10 MB state dict, each page of it a fault
            tensor = torch.frombuffer(
                self.payload, dtype=dtype, count=nbytes // dtype.itemsize, offset=offset
            ).view(shape)
        else:  # one copy out of the frame, owned by the tensor
            raw = bytearray(self.payload[offset : offset + nbytes])
            tensor = torch.frombuffer(raw, dtype=dtype).reshape(shape)
            if (
                dtype == torch.bool
            ):  # a byte other than 0/1 is not a bool: normalise, never trust it
                tensor = tensor.view(torch.uint8).ne(0)
        return tensor.to(device) if self.allow_cuda and device != "cpu" else tensor


def _aligned(payload: memoryview, offset: int) -> bool:
    """Whether the bytes at ``offset`` of a writable frame's payload are 16-byte aligned in memory (a
    read-only frame is copied from, never shared)."""
    if payload.readonly:
        return False
    return not (ctypes.addressof(ctypes.c_char.from_buffer(payload)) + offset) % 16


def _check_table(
    entries: list[object], payload_len: int
) -> list[tuple[torch.dtype, list[int], int, int, str]]:
    """Validate every entry (nothing materialised): they must tile the payload exactly, in order."""
    if len(entries) > MAX_TENSORS:
        raise WireError(f"{len(entries)} tensors in one frame (at most {MAX_TENSORS})")
    table: list[tuple[torch.dtype, list[int], int, int, str]] = []
    end = 0
    for entry in entries:
        dtype, shape, offset, nbytes, device = _check_entry(entry)
        if offset != end:  # sorted by offset, no gap, no overlap
            raise WireError(
                f"tensor bytes at {offset} do not follow the previous tensor (ending at {end})"
            )
        end = offset + nbytes
        table.append((dtype, shape, offset, nbytes, device))
    if end != payload_len:
        raise WireError(f"the tensors cover {end} bytes of a {payload_len}-byte payload")
    return table


def _check_entry(entry: object) -> tuple[torch.dtype, list[int], int, int, str]:
    if type(entry) is not dict or entry.keys() != _ENTRY_KEYS:
        raise WireError("malformed tensor entry")
    dtype = DTYPES.get(entry["dtype"]) if type(entry["dtype"]) is str else None
    shape, offset, nbytes = entry["shape"], entry["offset"], entry["nbytes"]
    if dtype is None:
        raise WireError(f"dtype {str(entry['dtype'])[:40]!r} not allowed")
    if (
        type(shape) is not list
        or len(shape) > MAX_DIMS
        or any(type(d) is not int or not 0 <= d < MAX_DIM for d in shape)
    ):
        raise WireError("shape must be a list of at most 8 ints in [0, 2**31)")
    if type(offset) is not int or type(nbytes) is not int or offset < 0 or nbytes < 0:
        raise WireError("offset and nbytes must be non-negative ints")
    if math.prod(shape) * dtype.itemsize != nbytes:
        raise WireError("tensor bytes do not match its shape")
    device = entry["device"]
    if type(device) is not str or device not in _DEVICE_NAMES:
        raise WireError(f"device {str(device)[:40]!r} not allowed")
    return dtype, shape, offset, nbytes, device


def _dec(node: object, tensors: _Tensors, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise WireError("value nested too deep")
    if node is None or type(node) in _SCALARS:
        if type(node) is int and abs(node) > 1 << 63:
            raise WireError("integer out of range")
        return node
    if type(node) is list:
        return [_dec(v, tensors, depth + 1) for v in node]
    if type(node) is not dict or len(node) != 1:
        raise WireError("malformed value node")
    ((tag, body),) = node.items()
    return _dec_tagged(tag, body, tensors, depth)


def _dec_tagged(tag: str, body: object, tensors: _Tensors, depth: int) -> Any:
    if tag == "$t":
        return tensors.get(body)
    if tag == "$f" and body in _SPECIAL_FLOATS:
        return _SPECIAL_FLOATS[body]
    if tag == "$tu" and type(body) is list:
        return tuple(_dec(v, tensors, depth + 1) for v in body)
    if tag == "$m" and type(body) is list:
        return _dec_map(body, tensors, depth)
    if tag == "$d" and body in DTYPES:
        return DTYPES[body]
    if tag == "$dev" and type(body) is str:
        return _device(body, allow_cuda=True)  # a device name is only data: nothing is allocated
    if tag == "$v":
        return _dec_view(body, tensors)
    if (
        tag == "$h"
        and type(body) is list
        and len(body) == 2
        and type(body[0]) is int
        and type(body[1]) is str
    ):
        return HandleRef(body[0], body[1][:200])
    raise WireError(f"unknown or malformed tag {str(tag)[:40]!r}")


def _dec_view(body: object, tensors: _Tensors) -> View:
    """``[{"$t": i}, permute | null, narrow | null, share | null]``, every field checked against its
    base."""
    if (
        type(body) is not list
        or len(body) != 4
        or type(body[0]) is not dict
        or set(body[0]) != {"$t"}
    ):
        raise WireError("malformed view")
    fields = [
        None
        if v is None
        else tuple(v)
        if type(v) is list and len(v) <= MAX_DIMS and all(type(d) is int for d in v)
        else fail("malformed view field")
        for v in body[1:3]
    ]
    if body[3] is not None and type(body[3]) is not int:
        raise WireError("malformed view share")
    try:
        return checked_view(View(tensors.get(body[0]["$t"]), fields[0], fields[1], body[3]))
    except ValueRejected as exc:
        raise WireError(str(exc)) from None


def _dec_map(body: list[object], tensors: _Tensors, depth: int) -> dict[str | int, Any]:
    out: dict[str | int, Any] = {}
    for pair in body:
        if type(pair) is not list or len(pair) != 2 or type(pair[0]) not in (str, int):
            raise WireError("malformed map entry")
        out[pair[0]] = _dec(pair[1], tensors, depth + 1)
    return out


def _device(text: object, allow_cuda: bool) -> torch.device:
    if type(text) is str and text in _DEVICE_NAMES:
        device = torch.device(text)
        if device.type == "cuda" and not allow_cuda:
            raise WireError("cuda tensors are not allowed here")
        return device
    raise WireError(f"device {text!r} not allowed")


# -- reading from a stream ----------------------------------------------------------------------
def read_frame(
    stream: BinaryIO, *, max_payload: int = MAX_PAYLOAD, allow_cuda: bool = False
) -> Any:
    """Read exactly one frame from a blocking stream (the worker's side; EOF → WireError): the
    payload read straight into the frame's one buffer."""
    head = _read_exact(stream, 8)
    (hlen,) = struct.unpack_from("<I", head, 4)
    if head[:4] != MAGIC or hlen > MAX_HEADER:
        raise WireError("bad frame start")
    rest = _read_exact(stream, hlen + 8)
    (plen,) = struct.unpack_from("<Q", rest, hlen)
    if plen > max_payload:
        raise WireError("payload over the cap")
    frame = bytearray(16 + hlen + plen)
    frame[: 16 + hlen] = head + rest
    _read_into(stream, memoryview(frame)[16 + hlen :])
    return decode(frame, max_payload=max_payload, allow_cuda=allow_cuda)


def _read_exact(stream: BinaryIO, n: int) -> bytes:
    data = bytearray(n)
    _read_into(stream, memoryview(data))
    return bytes(data)


def _read_into(stream: BinaryIO, view: memoryview) -> None:
    while view:
        got = stream.readinto(view)  # type: ignore[attr-defined]  # a raw or buffered binary stream
        if not got:
            raise EOFError("stream closed")
        view = view[got:]
