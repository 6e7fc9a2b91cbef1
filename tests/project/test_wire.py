"""The wire decoder: round trips, and a fuzz of malicious frames that must parse or raise WireError."""

from __future__ import annotations

import json
import random
import struct

import pytest
import torch

from grader.sandbox import wire
from grader.student.values import HandleRef


def _frame(header: bytes, payload: bytes = b"") -> bytes:
    return wire.MAGIC + struct.pack("<I", len(header)) + header + struct.pack("<Q", len(payload)) + payload


def test_round_trip_of_every_allowed_value():
    value = (torch.randn(2, 3), torch.randn(3, dtype=torch.bfloat16), torch.tensor([True, False]),
             torch.empty(0, 4), {"a": [1, 2.5, float("nan"), float("-inf")], 7: None}, torch.float64,
             HandleRef(4, "Lin"), "text", False)
    got = wire.decode(wire.encode(value))
    assert isinstance(got, tuple) and len(got) == len(value)
    for a, b in zip(got[:4], value[:4]):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    assert got[4][7] is None and got[4]["a"][:2] == [1, 2.5] and got[4]["a"][3] == float("-inf")
    assert got[5:] == value[5:]


@pytest.mark.parametrize("header, payload", [
    (b"{not json", b""),
    (b"[" * 60000 + b"]" * 60000, b""),
    (json.dumps({"v": {"$t": 0}, "t": [{"dtype": "object", "shape": [1], "offset": 0, "nbytes": 8,
                                       "device": "cpu"}]}).encode(), b"\0" * 8),
    (json.dumps({"v": {"$t": 0}, "t": [{"dtype": "float32", "shape": [True], "offset": 0, "nbytes": 4,
                                       "device": "cpu"}]}).encode(), b"\0" * 4),
    (json.dumps({"v": {"$t": 0}, "t": [{"dtype": "float32", "shape": [65536, 65536], "offset": 0, "nbytes": 4,
                                       "device": "cpu"}]}).encode(), b"\0" * 4),
    (json.dumps({"v": {"$t": 0}, "t": [{"dtype": "float32", "shape": [1], "offset": -4, "nbytes": 4,
                                       "device": "cpu"}]}).encode(), b"\0" * 4),
    (b'{"v":{"$t":0},"t":[{"dtype":"float32","shape":[' + b"9" * 5000 + b'],"offset":0,"nbytes":4,"device":"cpu"}]}',
     b"\0" * 4),
    (json.dumps({"v": {"$t": 3}, "t": []}).encode(), b""),
    (json.dumps({"v": {"$pickle": "gASV"}, "t": []}).encode(), b""),
    (json.dumps({"v": 1, "t": [], "extra": 1}).encode(), b""),
])
def test_malicious_frames_raise_wire_error(header, payload):
    with pytest.raises(wire.WireError):
        wire.decode(_frame(header, payload))


def test_length_fields_are_checked():
    good = wire.encode(torch.ones(4))
    with pytest.raises(wire.WireError):
        wire.decode(good[:-1])
    with pytest.raises(wire.WireError):
        wire.decode(wire.MAGIC + struct.pack("<I", 10 ** 6) + good[8:])
    with pytest.raises(wire.WireError):
        wire.decode(b"XXXX" + good[4:])


def test_fuzzed_frames_never_raise_anything_but_wire_error():
    rng = random.Random(2026)
    seeds = [wire.encode(v) for v in (torch.randn(3, 2), {"a": (1, 2)}, [torch.ones(2, dtype=torch.int64)],
                                      HandleRef(1, "X"))]
    parsed = rejected = 0
    for _ in range(4000):
        frame = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 6)):
            i = rng.randrange(len(frame))
            frame[i] = rng.randrange(256)
        if rng.random() < 0.2:
            frame = frame[: rng.randrange(len(frame))]
        try:
            wire.decode(bytes(frame))
            parsed += 1
        except wire.WireError:
            rejected += 1
    assert parsed + rejected == 4000 and rejected > 1000
