"""Sliding-window attention's misconceptions: the mask with one step changed (the window one key too
wide or too narrow, symmetric, top-left aligned, inverted), banded attention block by block with one
step changed (the band's first key wrong, the tile's mask cut from the top rows of a square one, the
ragged last block dropped, no scale); the rolling cache's are in
:mod:`~grader.testing.catalogue.rolling`.

Trusted blockwise and caching code, run by the hidden suites only (it is the exercise's computation
written block by block, so it never ships to students: :data:`grader.release.repository.RUNTIME`
leaves it out).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from grader.testing.catalogue.bands import band_detector
from grader.testing.catalogue.scales import scale_detector
from grader.testing.diagnosis import Suspects, Variant
from grader.testing.variants import attention


def keep(
    L: int, S: int, window: int, *, align: str = "bottom-right", symmetric: bool = False
) -> torch.Tensor:
    """(L, S) True where query i (at S - L + i, or at i when ``align`` is "top-left") may see key j:
    0 <= p - j < window (``symmetric``: |p - j| < window)."""
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


# -----------------------------------------------------------------------------------------------
# banded attention
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
    tile_mask: str = "keep",
) -> torch.Tensor:
    """Banded attention block by block in float64 with one step changeable: ``band(start)`` the
    block's first key (a Python slice start, unclamped as a student's is), ``top_rows`` the tile's
    mask cut from the top rows of the band's square mask, ``drop_ragged`` the shorter last block
    left out, ``tile_mask`` how the tile's mask is used ("keep": masked_fill(~keep), "blocked":
    masked_fill(keep), "none": not at all)."""
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
        if tile_mask != "none":
            s = s.masked_fill(tile if tile_mask == "blocked" else ~tile, float("-inf"))
        w = torch.softmax(s, dim=softmax_dim)
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
            "band-range",
            "the band as the last `window` keys before the block's end (end - window), not window - 1 "
            "keys before its first query: the block's first queries lose their keys",
            run(band=lambda start: max(0, min(start + block_size, T) - window)),
        ),
        Variant(
            "band-tile-mask",
            "each tile masked with the top rows of the band's square mask: the block's "
            "queries are its band's LAST positions (a bottom-right mask)",
            run(top_rows=True),
        ),
        Variant(
            "mask-missing",
            "banded attention with no mask inside the tiles: each query sees every key of its "
            "block's band, later ones and ones beyond the window included",
            run(tile_mask="none"),
        ),
        Variant(
            "mask-inverted",
            "banded attention with each tile's mask inverted: masked_fill(keep, -inf) blocks the "
            "keys the window keeps",
            run(tile_mask="blocked"),
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
