"""Sliding-window attention's catalogue (:mod:`grader.testing.catalogue.window`): each diagnosis on a corpus bug that
shows it and never on the reference (the mask, banded attention, the rolling cache)."""

from __future__ import annotations

import re
from types import ModuleType

import pytest
import torch

from grader.protocol.errors import StudentError
from grader.testing.catalogue.rolling import (
    buffer_suspects,
    decode_suspects,
    held_suspects,
    reset_suspects,
)
from grader.testing.catalogue.window import banded_suspects, mask_suspects
from grader.testing.diagnosis import PRECISION, Suspects
from tests.project.support.common import CORPUS, ROOT
from tests.project.testing.test_catalogue_rope import load  # a corpus module loaded by path

BUGS = CORPUS / "buggy" / "sliding_window"


def ids(said: str) -> set[str]:
    return {
        i for found in re.findall(r"diagnosis \[([a-z0-9, -]+)\]", said) for i in found.split(", ")
    }


def named(suspects: Suspects, got: torch.Tensor, want: torch.Tensor) -> set[str]:
    return ids(
        (suspects + PRECISION).explain(got, want, 1e-10, 1e-7)
    )  # as every float64 check tries it last


def reference() -> ModuleType:
    return load(ROOT / "solutions" / "sliding_window.py")


MASK_BUGS = [
    ("mask_window_plus_one", "window-off-by-one", 7, 3, None),
    ("mask_window_minus_one", "window-off-by-one", 7, 3, None),
    ("mask_symmetric", "window-symmetric", 7, 3, None),
    ("mask_top_left", "mask-top-left", 3, 4, 10),
    ("mask_inverted", "mask-inverted", 7, 3, None),
]


@pytest.mark.parametrize("bug,mid,L,window,S", MASK_BUGS)
def test_a_mask_bug_is_named_and_the_reference_is_not(bug, mid, L, window, S):
    kwargs = {} if S is None else {"kv_len": S}
    want = reference().sliding_window_mask(L, window, **kwargs)
    suspects = mask_suspects(L, window, S)
    assert named(
        suspects, load(BUGS / f"{bug}.py").sliding_window_mask(L, window, **kwargs), want
    ) == {mid}
    assert named(suspects, want.clone(), want) == set()


BANDED_BUGS = [
    ("banded_block_keys_only", "band-range"),
    ("banded_tile_mask_top_left", "band-tile-mask"),
    ("banded_drops_ragged_block", "ragged-dropped"),
    ("banded_no_scale", "wrong-scale"),
]


def qkv(T: int = 37, window: int = 5) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(5)
    return tuple(torch.randn(2, 3, T, 8, generator=gen, dtype=torch.float64) for _ in range(3))


@pytest.mark.parametrize("bug,mid", BANDED_BUGS)
def test_a_banded_bug_is_named_and_the_reference_is_not(bug, mid):
    q, k, v = qkv()
    want = reference().banded_attention(q, k, v, 5, block_size=8)
    suspects = banded_suspects(q, k, v, 5, 8)
    assert named(
        suspects, load(BUGS / f"{bug}.py").banded_attention(q, k, v, 5, block_size=8), want
    ) == {mid}
    assert named(suspects, want.clone(), want) == set()


def test_an_unclamped_band_raises_what_its_variant_raises():
    q, k, v = qkv()
    with pytest.raises(Exception) as info:
        load(BUGS / "banded_negative_band_start.py").banded_attention(q, k, v, 5, block_size=8)
    error = StudentError(str(info.value), exc_type=type(info.value).__name__)
    said = banded_suspects(q, k, v, 5, 8).explain_error(error)
    assert said is not None and ids(said) == {"band-range"}


def decode(cache, q, k, v, chunks):
    outs, at = [], 0
    for t in chunks:
        outs.append(cache(q[..., at : at + t, :], k[..., at : at + t, :], v[..., at : at + t, :]))
        at += t
    return torch.cat(outs, dim=-2)


CACHE_BUGS = [
    ("cache_writes_before_attending", "cache-write-before-attend"),
    ("cache_chunk_mask_first_rows", "mask-top-left"),
    ("cache_keeps_window_plus_one", "window-off-by-one"),
    ("cache_attends_unwritten_slots", "cache-unwritten-slots"),
]


@pytest.mark.parametrize("bug,mid", CACHE_BUGS)
def test_a_decoding_bug_is_named_and_the_reference_is_not(bug, mid):
    q, k, v = (x[:1] for x in qkv(23))
    chunks = [4, 1, 6, 2, 7, 3]
    want = decode(reference().RollingKVCache(1, 3, 5, 8, dtype=torch.float64), q, k, v, chunks)
    suspects = decode_suspects(q, k, v, 5, chunks)
    got = decode(
        load(BUGS / f"{bug}.py").RollingKVCache(1, 3, 5, 8, dtype=torch.float64), q, k, v, chunks
    )
    assert named(suspects, got, want) == {mid}
    assert named(suspects, want.clone(), want) == set()


@pytest.mark.parametrize(
    "bug,mid",
    [
        ("cache_ring_order_after_wrap", "cache-ring-order"),
        ("cache_attends_unwritten_slots", "cache-unwritten-slots"),
        ("cache_keeps_window_plus_one", "window-off-by-one"),
        ("cache_appends_without_bound", "cache-unbounded"),
    ],
)
def test_an_update_bug_is_named_and_the_reference_is_not(bug, mid):
    ks = qkv(14)[0][:, :2, :, :3].contiguous()
    for module, expect in ((load(BUGS / f"{bug}.py"), {mid}), (reference(), set())):
        cache, said = module.RollingKVCache(2, 2, 4, 3, dtype=torch.float64), set()
        for t in range(14):
            got = cache.update(ks[..., t : t + 1, :], ks[..., t : t + 1, :])[0]
            want = ks[..., max(0, t - 3) : t + 1, :]
            said = named(held_suspects(ks, 4, [1] * (t + 1)), got, want)
            if said or not torch.equal(got, want):
                break
        # five tokens fed: a cache that keeps them all and one of window + 1 slots hold the same (named together)
        assert said == expect or (
            expect and expect <= said <= {"cache-unbounded", "window-off-by-one"}
        )


def test_a_reset_that_keeps_the_count_is_named_and_the_reference_is_not():
    q, k, v = (x[:1, :2] for x in qkv(10))
    for module, expect in (
        (load(BUGS / "cache_reset_keeps_count.py"), {"cache-reset"}),
        (reference(), set()),
    ):
        cache = module.RollingKVCache(1, 2, 3, 8, dtype=torch.float64)
        decode(cache, 3 * q[..., :7, :], 3 * k[..., :7, :], 3 * v[..., :7, :], [1] * 7)
        cache.reset()
        want = decode(
            reference().RollingKVCache(1, 2, 3, 8, dtype=torch.float64),
            *(x[..., :3, :] for x in (q, k, v)),
            [1, 1, 1],
        )
        got = decode(cache, *(x[..., :3, :] for x in (q, k, v)), [1, 1, 1])
        assert (
            named(reset_suspects(*(x[..., :3, :] for x in (q, k, v)), 3, [1, 1, 1]), got, want)
            == expect
        )


def test_storage_of_window_plus_one_slots_is_named_and_the_reference_is_not():
    zeros = torch.zeros(2, 3, 4, 5, dtype=torch.float64)
    bug = load(BUGS / "cache_keeps_window_plus_one.py").RollingKVCache(
        2, 3, 4, 5, dtype=torch.float64
    )
    assert ids(buffer_suspects((2, 3, 4, 5)).explain(bug.k_cache, zeros, 0.0, 0.0)) == {
        "window-off-by-one"
    }
    ok = reference().RollingKVCache(2, 3, 4, 5, dtype=torch.float64)
    assert ids(buffer_suspects((2, 3, 4, 5)).explain(ok.k_cache, zeros, 0.0, 0.0)) == set()
