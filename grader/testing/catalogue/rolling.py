"""The rolling KV cache's misconceptions (sliding-window decoding): the cache with one step changed
(unwritten slots attended, storage order after the ring wraps, the chunk written before it attends,
the chunk's mask aligned top-left, window + 1 tokens held).

Trusted caching code, run by the hidden suites only (it decodes as the exercise does, so it never
ships to students: :data:`grader.release.repository.RUNTIME` leaves it out). The window's mask is
:func:`grader.testing.catalogue.window.keep`, the one definition both modules use.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from grader.testing.catalogue.window import keep
from grader.testing.diagnosis import Suspects, Variant
from grader.testing.variants import attention


def buffer_suspects(shape: tuple[int, int, int, int]) -> Suspects:
    """What a fresh cache's (B, H, window, hd) zero buffer is with one slot too many (window + 1
    held)."""
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
    """A rolling cache's storage in float64 with one step changeable: ``capacity`` tokens (window +
    1: one too many), ``storage_order`` held() in slot order, ``all_slots`` held() returning every
    slot, written or not."""

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
    """What decoding ``q, k, v`` in ``chunks`` through a fresh ``RollingKVCache(window)`` gives with
    each misconception."""

    def run(ring: dict[str, Any], step: dict[str, bool]) -> Callable[[], torch.Tensor]:
        ring = {**ring, "capacity": window + 1} if ring.get("capacity") == -1 else ring
        return lambda: _decoded(q, k, v, window, chunks, ring, step)

    return Suspects(
        tuple(Variant(mid, says, run(ring, step)) for mid, says, ring, step in CACHE_STEPS)
    )


def reset_suspects(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int, chunks: Sequence[int]
) -> Suspects:
    """What decoding after ``reset()`` gives when reset keeps the count: the held slots are the
    zeroed old ones."""
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
    """What ``update`` returns (keys: ``which`` 0, values: 1) after feeding ``ks`` (its values
    ``ks`` too) in ``chunks`` with each misconception of the storage."""

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
