"""Sliding-window attention's misconceptions: the mask with one step changed (the window one key too wide or too
narrow, symmetric, top-left aligned, inverted), banded attention block by block with one step changed (the band's
first key wrong, the tile's mask cut from the top rows of a square one, the ragged last block dropped, no scale),
and the rolling cache with one step changed (unwritten slots attended, storage order after the ring wraps, the
chunk written before it attends, the chunk's mask aligned top-left, window + 1 tokens held).

Trusted blockwise and caching code, run by the hidden suites only (it is the exercise's computation written block
by block, so it never ships to students: :data:`grader.release.repository.RUNTIME` leaves it out).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from grader.testing.catalogue.bands import band_detector
from grader.testing.catalogue.scales import scale_detector
from grader.testing.diagnosis import Suspects, Variant
from grader.testing.variants import attention


def keep(
    L: int, S: int, window: int, *, align: str = "bottom-right", symmetric: bool = False
) -> torch.Tensor:
    """(L, S) True where query i (at S - L + i, or at i when ``align`` is "top-left") may see key j: 0 <= p - j <
    window (``symmetric``: |p - j| < window)."""
    p = torch.arange(L)[:, None] + (0 if align == "top-left" else S - L)
    behind = p - torch.arange(S)[None, :]
    return behind.abs() < window if symmetric else (behind >= 0) & (behind < window)


def mask_suspects(L: int, window: int, S: int | None = None) -> Suspects:
    """What ``sliding_window_mask(L, window, kv_len=S)`` gives with each misconception."""
    S = L if S is None else S
    items = [
        Variant(
            "window-off-by-one",
            f"the mask of window + 1 = {window + 1} keys (i - j <= window)",
            lambda: keep(L, S, window + 1),
        ),
        Variant(
            "window-off-by-one",
            f"the mask of window - 1 = {window - 1} keys (i - j < window - 1)",
            lambda: keep(L, S, window - 1),
        ),
        Variant(
            "window-symmetric",
            "a symmetric window |i - j| < window, which also sees future keys",
            lambda: keep(L, S, window, symmetric=True),
        ),
        Variant(
            "mask-inverted",
            "the mask negated: True marks the blocked keys",
            lambda: ~keep(L, S, window),
        ),
    ]
    if S != L:
        items.insert(
            2,
            Variant(
                "mask-top-left",
                "the mask aligned top-left (query i at position i) where it is "
                f"bottom-right (query i at position kv_len - seq_len + i = {S - L} + i)",
                lambda: keep(L, S, window, align="top-left"),
            ),
        )
    return Suspects((*items, band_detector()))  # any other band: the query's own key left out, ...


# ----------------------------------------------------------------------------------------------- banded attention
def banded(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    window: int,
    block_size: int,
    *,
    band: Callable[[int], int] | None = None,
    top_rows: bool = False,
    drop_ragged: bool = False,
    softmax_dim: int = -1,
) -> torch.Tensor:
    """Banded attention block by block in float64 with one step changeable: ``band(start)`` the block's first key
    (a Python slice start, unclamped as a student's is), ``top_rows`` the tile's mask cut from the top rows of the
    band's square mask, ``drop_ragged`` the shorter last block left out."""
    q, k, v = (t.double() for t in (q, k, v))
    T, scale = q.shape[-2], 1.0 / math.sqrt(q.shape[-1])
    first = band or (lambda start: max(0, start - window + 1))
    out = []
    for start in range(0, T - T % block_size if drop_ragged else T, block_size):
        end, lo = min(start + block_size, T), first(start)
        s = q[..., start:end, :] @ k[..., lo:end, :].transpose(-2, -1) * scale
        tile = (
            keep(end - lo, end - lo, window)[: end - start]
            if top_rows
            else keep(end - start, end - lo, window)
        )
        w = torch.softmax(s.masked_fill(~tile, float("-inf")), dim=softmax_dim)
        out.append(w @ v[..., lo:end, :])
    return torch.cat(out, dim=-2)


def banded_suspects(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int, block_size: int = 64
) -> Suspects:
    """What ``banded_attention(q, k, v, window, block_size)`` gives with each misconception."""
    T = q.shape[-2]

    def run(**knobs: Any) -> Callable[[], torch.Tensor]:
        return lambda: banded(q, k, v, window, block_size, **knobs).to(q.dtype)

    def formula(**knobs: Any) -> Callable[[], torch.Tensor]:
        return lambda: attention(q, k, v, **{"keep": keep(T, T, window), **knobs})[0].to(q.dtype)

    items = [
        Variant(
            "band-range",
            "each block of queries scored against its own keys only (the band starting at the "
            "block's first query, not window - 1 keys before it)",
            run(band=lambda start: start),
        ),
        Variant(
            "band-range",
            "the band starting at start - window + 1 unclamped: a negative slice start for "
            "the first blocks",
            run(band=lambda start: start - window + 1),
        ),
        Variant(
            "band-range",
            "the band starting one key late (start - window + 2)",
            run(band=lambda start: max(0, start - window + 2)),
        ),
        Variant(
            "band-tile-mask",
            "each tile masked with the top rows of the band's square mask: the block's "
            "queries are its band's LAST positions (a bottom-right mask)",
            run(top_rows=True),
        ),
        Variant(
            "softmax-wrong-dim",
            "banded attention with each tile's softmax over its queries (dim -2) instead of its keys",
            run(softmax_dim=-2),
        ),
        Variant(
            "ragged-dropped",
            f"banded attention without the shorter last block of {T % block_size} queries",
            run(drop_ragged=True),
        ),
        Variant(
            "window-off-by-one",
            f"attention over a window of window + 1 = {window + 1} keys",
            formula(keep=keep(T, T, window + 1)),
        ),
        Variant(
            "window-off-by-one",
            f"attention over a window of window - 1 = {window - 1} keys",
            formula(keep=keep(T, T, window - 1)),
        ),
        Variant(
            "window-symmetric",
            "attention over a symmetric window |i - j| < window, future keys included",
            formula(keep=keep(T, T, window, symmetric=True)),
        ),
        Variant(
            "wrong-scale",
            "the window's attention with no scaling of the scores",
            formula(scale=1.0),
        ),
        Variant(
            "wrong-scale",
            f"the window's attention with the scores scaled by 1/hd = 1/{q.shape[-1]}",
            formula(scale=1.0 / q.shape[-1]),
        ),
    ]
    E = q.shape[-1]
    sizes = {"head_dim": E, "window": window, "T": T}
    work = q.numel() // E * T  # scores per run (the formula's full matrix)
    fitted = scale_detector(lambda c: formula(scale=c)(), 1 / math.sqrt(E), sizes, work)
    return Suspects((*items, fitted))


# ----------------------------------------------------------------------------------------------- the rolling cache
def buffer_suspects(shape: tuple[int, int, int, int]) -> Suspects:
    """What a fresh cache's (B, H, window, hd) zero buffer is with one slot too many (window + 1 held)."""
    B, H, window, hd = shape
    return Suspects(
        (
            Variant(
                "window-off-by-one",
                f"storage of window + 1 = {window + 1} slots",
                lambda: torch.zeros(B, H, window + 1, hd, dtype=torch.float64),
            ),
        )
    )


class Ring:
    """A rolling cache's storage in float64 with one step changeable: ``capacity`` tokens (window + 1: one too many),
    ``storage_order`` held() in slot order, ``all_slots`` held() returning every slot, written or not."""

    def __init__(
        self,
        shape: tuple[int, int, int],
        window: int,
        *,
        capacity: int | None = None,
        storage_order: bool = False,
        all_slots: bool = False,
        seen: int = 0,
    ) -> None:
        self.window, self.capacity = window, capacity or window
        self.k = torch.zeros(*shape[:2], self.capacity, shape[2], dtype=torch.float64)
        self.v = torch.zeros_like(self.k)
        self.storage_order, self.all_slots, self.seen = storage_order, all_slots, seen

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        t = k.shape[-2]
        newest = min(t, self.capacity)
        slots = torch.arange(self.seen + t - newest, self.seen + t) % self.capacity
        self.k[..., slots, :], self.v[..., slots, :] = (
            k[..., t - newest :, :].double(),
            v[..., t - newest :, :].double(),
        )
        self.seen += t
        return self.held()

    def held(self) -> tuple[torch.Tensor, torch.Tensor]:
        n = self.capacity if self.all_slots else min(self.seen, self.capacity)
        order = (
            torch.arange(n)
            if self.storage_order
            else torch.arange(self.seen - n, self.seen) % self.capacity
        )
        return self.k[..., order, :], self.v[..., order, :]

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        *,
        write_first: bool = False,
        top_left: bool = False,
    ) -> torch.Tensor:
        keys, values = (
            self.update(k, v)
            if write_first
            else (torch.cat((h, x.double()), dim=-2) for h, x in zip(self.held(), (k, v)))
        )
        t, S = q.shape[-2], keys.shape[-2]
        mask = keep(t, S, self.capacity, align="top-left" if top_left else "bottom-right")
        out = attention(q, keys, values, keep=mask, dead_rows_zero=False)[
            0
        ]  # a row with no key: NaN, as a student's
        if not write_first:
            self.update(k, v)
        return out


def _decoded(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    window: int,
    chunks: Sequence[int],
    ring: dict[str, Any],
    step: dict[str, bool],
) -> torch.Tensor:
    cache, outs, at = Ring((q.shape[0], q.shape[1], q.shape[-1]), window, **ring), [], 0
    for t in chunks:
        outs.append(
            cache.forward(
                q[..., at : at + t, :], k[..., at : at + t, :], v[..., at : at + t, :], **step
            )
        )
        at += t
    return torch.cat(outs, dim=-2).to(q.dtype)


CACHE_STEPS: tuple[tuple[str, str, dict[str, Any], dict[str, bool]], ...] = (
    (
        "cache-unwritten-slots",
        "decoding that attends to all `window` slots, the unwritten ones (zeros) too",
        {"all_slots": True},
        {},
    ),
    (
        "cache-ring-order",
        "decoding whose held keys come back in slot order once the ring wraps, not oldest first",
        {"storage_order": True},
        {},
    ),
    (
        "window-off-by-one",
        "decoding with window + 1 tokens held and attended",
        {"capacity": -1},
        {},
    ),
    (
        "cache-write-before-attend",
        "decoding that writes each chunk into the cache before it attends, so a chunk's "
        "first queries lose their oldest keys",
        {},
        {"write_first": True},
    ),
    (
        "mask-top-left",
        "decoding whose chunk mask is the first t rows of the square mask (top-left) instead of the "
        "last t (bottom-right)",
        {},
        {"top_left": True},
    ),
)


def decode_suspects(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int, chunks: Sequence[int]
) -> Suspects:
    """What decoding ``q, k, v`` in ``chunks`` through a fresh ``RollingKVCache(window)`` gives with each
    misconception."""

    def run(ring: dict[str, Any], step: dict[str, bool]) -> Callable[[], torch.Tensor]:
        ring = {**ring, "capacity": window + 1} if ring.get("capacity") == -1 else ring
        return lambda: _decoded(q, k, v, window, chunks, ring, step)

    return Suspects(
        tuple(Variant(mid, says, run(ring, step)) for mid, says, ring, step in CACHE_STEPS)
    )


def reset_suspects(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int, chunks: Sequence[int]
) -> Suspects:
    """What decoding after ``reset()`` gives when reset keeps the count: the held slots are the zeroed old ones."""
    return Suspects(
        (
            Variant(
                "cache-reset",
                "decoding after a reset() that zeroed the storage but kept the token "
                "count: the new tokens attend to zeroed slots of the old sequence",
                lambda: _decoded(q, k, v, window, chunks, {"seen": 10 * window}, {}),
            ),
        )
    )


def held_suspects(ks: torch.Tensor, window: int, chunks: Sequence[int], which: int = 0) -> Suspects:
    """What ``update`` returns (keys: ``which`` 0, values: 1) after feeding ``ks`` (its values ``ks`` too) in
    ``chunks`` with each misconception of the storage."""

    def run(**ring: Any) -> Callable[[], torch.Tensor]:
        def go() -> torch.Tensor:
            cache, at, got = (
                Ring((ks.shape[0], ks.shape[1], ks.shape[-1]), window, **ring),
                0,
                ks[..., :0, :],
            )
            for t in chunks:
                got, at = (
                    cache.update(ks[..., at : at + t, :], ks[..., at : at + t, :])[which],
                    at + t,
                )
            return got.to(ks.dtype)

        return go

    fed = sum(
        chunks
    )  # up to window + 1 tokens, a cache that keeps them all holds what window + 1 slots hold
    return Suspects(
        (
            Variant(
                "cache-unbounded",
                f"every token fed so far ({fed}): nothing dropped",
                run(capacity=max(fed, 1)),
                also=("window-off-by-one",) if fed == window + 1 else (),
            ),
            Variant(
                "cache-unwritten-slots",
                "every `window` slot returned, the unwritten ones (zeros) too",
                run(all_slots=True),
            ),
            Variant(
                "cache-ring-order",
                "the slots in storage order, not oldest first once the ring wraps",
                run(storage_order=True),
            ),
            Variant(
                "window-off-by-one",
                f"the last window + 1 = {window + 1} tokens held",
                run(capacity=window + 1),
            ),
        )
    )
