"""The wire decoder: round trips, and a fuzz of malicious frames that must parse or raise WireError."""

from __future__ import annotations

import json
import random
import struct

import pytest
import torch

from grader.protocol import wire, wireparse
from grader.protocol.values import HandleRef


def _frame(header: bytes, payload: bytes = b"") -> bytes:
    return (
        wire.MAGIC
        + struct.pack("<I", len(header))
        + header
        + struct.pack("<Q", len(payload))
        + payload
    )


def test_round_trip_of_every_allowed_value():
    value = (
        torch.randn(2, 3),
        torch.randn(3, dtype=torch.bfloat16),
        torch.tensor([True, False]),
        torch.empty(0, 4),
        {"a": [1, 2.5, float("nan"), float("-inf")], 7: None},
        torch.float64,
        HandleRef(4, "Lin"),
        "text",
        False,
    )
    got = wireparse.decode(wire.encode(value))
    assert isinstance(got, tuple) and len(got) == len(value)
    for a, b in zip(got[:4], value[:4]):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    assert got[4][7] is None and got[4]["a"][:2] == [1, 2.5] and got[4]["a"][3] == float("-inf")
    assert got[5:] == value[5:]


@pytest.mark.parametrize(
    "header, payload",
    [
        (b"{not json", b""),
        (b"[" * 60000 + b"]" * 60000, b""),
        (
            json.dumps(
                {
                    "v": {"$t": 0},
                    "t": [
                        {"dtype": "object", "shape": [1], "offset": 0, "nbytes": 8, "device": "cpu"}
                    ],
                }
            ).encode(),
            b"\0" * 8,
        ),
        (
            json.dumps(
                {
                    "v": {"$t": 0},
                    "t": [
                        {
                            "dtype": "float32",
                            "shape": [True],
                            "offset": 0,
                            "nbytes": 4,
                            "device": "cpu",
                        }
                    ],
                }
            ).encode(),
            b"\0" * 4,
        ),
        (
            json.dumps(
                {
                    "v": {"$t": 0},
                    "t": [
                        {
                            "dtype": "float32",
                            "shape": [65536, 65536],
                            "offset": 0,
                            "nbytes": 4,
                            "device": "cpu",
                        }
                    ],
                }
            ).encode(),
            b"\0" * 4,
        ),
        (
            json.dumps(
                {
                    "v": {"$t": 0},
                    "t": [
                        {
                            "dtype": "float32",
                            "shape": [1],
                            "offset": -4,
                            "nbytes": 4,
                            "device": "cpu",
                        }
                    ],
                }
            ).encode(),
            b"\0" * 4,
        ),
        (
            b'{"v":{"$t":0},"t":[{"dtype":"float32","shape":['
            + b"9" * 5000
            + b'],"offset":0,"nbytes":4,"device":"cpu"}]}',
            b"\0" * 4,
        ),
        (json.dumps({"v": {"$t": 3}, "t": []}).encode(), b""),
        (json.dumps({"v": {"$pickle": "gASV"}, "t": []}).encode(), b""),
        (json.dumps({"v": 1, "t": [], "extra": 1}).encode(), b""),
    ],
)
def test_malicious_frames_raise_wire_error(header, payload):
    with pytest.raises(wire.WireError):
        wireparse.decode(_frame(header, payload))


def test_length_fields_are_checked():
    good = wire.encode(torch.ones(4))
    with pytest.raises(wire.WireError):
        wireparse.decode(good[:-1])
    with pytest.raises(wire.WireError):
        wireparse.decode(wire.MAGIC + struct.pack("<I", 10**6) + good[8:])
    with pytest.raises(wire.WireError):
        wireparse.decode(b"XXXX" + good[4:])


def test_fuzzed_frames_never_raise_anything_but_wire_error():
    rng = random.Random(2026)
    seeds = [
        wire.encode(v)
        for v in (
            torch.randn(3, 2),
            {"a": (1, 2)},
            [torch.ones(2, dtype=torch.int64)],
            HandleRef(1, "X"),
        )
    ]
    parsed = rejected = 0
    for _ in range(4000):
        frame = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 6)):
            i = rng.randrange(len(frame))
            frame[i] = rng.randrange(256)
        if rng.random() < 0.2:
            frame = frame[: rng.randrange(len(frame))]
        try:
            wireparse.decode(bytes(frame))
            parsed += 1
        except wire.WireError:
            rejected += 1
    assert parsed + rejected == 4000 and rejected > 1000


def _entry(offset: int, nbytes: int, *, dtype: str = "uint8", device: str = "cpu") -> dict:
    size = {"uint8": 1, "float32": 4, "bool": 1}[dtype]
    return {
        "dtype": dtype,
        "shape": [nbytes // size],
        "offset": offset,
        "nbytes": nbytes,
        "device": device,
    }


def _tensor_frame(tree, table, payload: bytes) -> bytes:
    return _frame(json.dumps({"v": tree, "t": table}).encode(), payload)


@pytest.mark.parametrize(
    "tree, table, size",
    [
        ([{"$t": i} for i in range(3)], [_entry(0, 64)] * 3, 64),  # entries over the same bytes
        ([{"$t": 0}, {"$t": 1}], [_entry(0, 64), _entry(32, 32)], 64),  # overlap
        ([{"$t": 0}, {"$t": 1}], [_entry(0, 16), _entry(32, 32)], 64),  # a gap
        ([{"$t": 0}], [_entry(0, 16)], 64),  # unreferenced bytes
        ([{"$t": 1}, {"$t": 0}], [_entry(16, 16), _entry(0, 16)], 32),  # not sorted by offset
        ([{"$t": 0}, {"$t": 0}], [_entry(0, 16)], 16),  # one entry used twice
        ({"$t": 0}, [_entry(0, 16), _entry(16, 0)], 16),  # an entry never used
        (
            [{"$t": i} for i in range(wire.MAX_TENSORS + 1)],
            [_entry(0, 0)] * (wire.MAX_TENSORS + 1),
            0,
        ),
        ({"$t": True}, [_entry(0, 4)], 4),
    ],
)
def test_tensor_tables_must_tile_the_payload_and_be_used_exactly_once(tree, table, size):
    with pytest.raises(wire.WireError):
        wireparse.decode(_tensor_frame(tree, table, b"\1" * size))


def test_replies_always_decode_to_cpu_and_bools_are_normalised():
    frame = _tensor_frame(
        [{"$t": 0}, {"$t": 1}],
        [_entry(0, 8, dtype="float32", device="cuda:0"), _entry(8, 3, dtype="bool")],
        b"\0" * 8 + b"\x00\x02\xff",
    )
    x, mask = wireparse.decode(
        frame
    )  # no allow_cuda: nothing is placed on (or allocated in) a device
    assert x.device.type == "cpu" and x.shape == (2,)
    assert mask.tolist() == [False, True, True] and mask.view(torch.uint8).tolist() == [0, 1, 1]


@pytest.mark.parametrize("error", [MemoryError, RecursionError, OverflowError, RuntimeError])
def test_any_exception_while_decoding_is_a_wire_error(monkeypatch, error):
    def explode(*args, **kwargs):
        raise error("boom")

    monkeypatch.setattr(wire.torch, "frombuffer", explode)
    with pytest.raises(wire.WireError, match=error.__name__):
        wireparse.decode(wire.encode(torch.ones(3)))


PEAK = """
import json, resource, struct, sys
from grader.protocol import wire, wireparse
payload = bytes(64 << 20)
entries = int(sys.argv[1])
header = json.dumps({"v": [{"$t": i} for i in range(entries)], "t": [
    {"dtype": "uint8", "shape": [len(payload)], "offset": 0, "nbytes": len(payload), "device": "cpu"}] * entries}).encode()
frame = wire.MAGIC + struct.pack("<I", len(header)) + header + struct.pack("<Q", len(payload)) + payload
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    wireparse.decode(frame, max_payload=len(payload))
    outcome = "decoded"
except wire.WireError:
    outcome = "rejected"
print(outcome, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) >> 10)
"""


@pytest.mark.parametrize("entries", [1, 16])
def test_decoding_never_amplifies_a_frame(entries):
    """16 entries over one 64 MiB payload once cost the trusted process ~2 GiB; now it is refused unread."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", PEAK, str(entries)], capture_output=True, text=True, check=True
    )
    outcome, grown_mib = done.stdout.split()
    assert outcome == ("decoded" if entries == 1 else "rejected")
    assert int(grown_mib) <= 80  # at most one copy of the payload, whatever the table says


def test_a_frame_holds_each_tensors_own_bytes_once_in_the_documented_layout():
    """The encoder writes its one buffer in place: every tensor's bytes, in table order, equal to the
    bytes read off the tensor another way (a uint8 view, listed), for strided, offset, empty, bool
    and half tensors; the frame decodes back to equal values."""
    base = torch.arange(60, dtype=torch.float32).reshape(3, 4, 5)
    value = {
        "strided": base.transpose(0, 2),  # not contiguous
        "offset": base[1:, 2:],  # a view into the middle of its storage
        "empty": torch.empty(0, 3),
        "mask": torch.tensor([[True, False], [False, True]]),
        "half": torch.linspace(-2, 2, 7, dtype=torch.float16),
        "n": [1, 2.5, None],
    }
    frame = wire.encode(value)
    (hlen,) = struct.unpack_from("<I", frame, 4)
    header = json.loads(bytes(frame[8 : 8 + hlen]))
    (plen,) = struct.unpack_from("<Q", frame, 8 + hlen)
    payload = bytes(frame[16 + hlen :])
    assert len(payload) == plen
    tensors = [value[k] for k in ("strided", "offset", "empty", "mask", "half")]
    for entry, t in zip(header["t"], tensors, strict=True):
        own = bytes(t.contiguous().view(torch.uint8).reshape(-1).tolist())
        assert payload[entry["offset"] : entry["offset"] + entry["nbytes"]] == own
    back = wireparse.decode(bytes(frame))
    for key in ("strided", "offset", "empty", "mask", "half"):
        assert back[key].dtype == value[key].dtype and torch.equal(back[key], value[key])
    assert back["n"] == [1, 2.5, None]


def _payload_start(frame: bytes | bytearray) -> int:
    (hlen,) = struct.unpack_from("<I", frame, 4)
    return 16 + hlen


@pytest.mark.parametrize(
    "value",
    [None, "x", {"a": 1}, torch.ones(3), (torch.ones(1, dtype=torch.float16), [2.5, "é"] * 7)]
    + [{"k" * n: torch.arange(n)} for n in range(1, 20)],
)
def test_every_frame_starts_its_payload_16_byte_aligned(value):
    """The encoder pads its JSON header with spaces (still the same JSON) so that big tensors can be
    read where they lie; the frame decodes to the same value."""
    frame = wire.encode(value)
    assert _payload_start(frame) % 16 == 0
    (hlen,) = struct.unpack_from("<I", frame, 4)
    text = bytes(frame[8 : 8 + hlen]).decode()
    padding = len(text) - len(text.rstrip(" "))
    assert padding < 16 and json.loads(text) == json.loads(text.rstrip(" "))
    back = wireparse.decode(frame)
    if isinstance(value, torch.Tensor):
        assert torch.equal(back, value)
    elif not isinstance(value, tuple):
        assert str(back) == str(value)


def _inside(t: torch.Tensor, frame: bytearray) -> bool:
    import ctypes

    start = ctypes.addressof(ctypes.c_char.from_buffer(frame))
    return start <= t.data_ptr() < start + len(frame)


def test_big_aligned_tensors_are_decoded_in_place_and_the_rest_copied():
    """A tensor of IN_PLACE_MIN bytes or more, 16-byte aligned in a writable frame, is read where it
    lies (the frame stays alive with it); small, misaligned, bool and read-only-frame tensors are
    copies. Every one equals what was sent, also after the frame's last other reference is gone."""
    big = torch.randn(wireparse.IN_PLACE_MIN // 4 + 4)  # aligned: the payload's first tensor
    odd = torch.arange(3, dtype=torch.float32)  # 12 bytes: what follows it is misaligned
    after_odd = torch.randn(wireparse.IN_PLACE_MIN // 8 + 1, dtype=torch.float64)
    small = torch.randn(10)
    mask = torch.rand(wireparse.IN_PLACE_MIN + 16) > 0.5
    value = {"big": big, "small": small, "odd": odd, "after_odd": after_odd, "mask": mask}
    frame = wire.encode(value)
    assert isinstance(frame, bytearray)
    back = wireparse.decode(frame)
    assert _inside(back["big"], frame)
    for copied in ("small", "odd", "after_odd", "mask"):
        assert not _inside(back[copied], frame), copied
    del frame
    import gc

    gc.collect()
    for key, sent in value.items():
        assert back[key].dtype == sent.dtype and torch.equal(back[key], sent), key
    back["big"].add_(1)  # writable, and only its own bytes change
    assert torch.equal(back["big"], big + 1) and torch.equal(back["small"], small)
    from_bytes = wireparse.decode(bytes(wire.encode({"big": big})))
    assert torch.equal(from_bytes["big"], big)


@pytest.mark.parametrize(
    "device", ["cuda:16", "cuda:-1", "cuda:00", "CPU", "cpu ", "meta", "mps", 3]
)
def test_a_tensor_entry_names_only_a_known_device(device):
    header = json.dumps(
        {
            "v": {"$t": 0},
            "t": [{"dtype": "float32", "shape": [1], "offset": 0, "nbytes": 4, "device": device}],
        }
    ).encode()
    with pytest.raises(wire.WireError):
        wireparse.decode(_frame(header, b"\0" * 4))
