"""FlashAttention's misconceptions: the online softmax computed tile by tile with one step changed
(the running max started at 0, the accumulator or the denominator not rescaled, each tile normalised
on its own, the ragged last tile dropped), and the formula-level ones (scale, causal alignment,
is_causal by default).

Trusted tiled code, run by the hidden suites only: it is a tiled attention, so it never ships to
students (:data:`grader.release.repository.RUNTIME` leaves it out); the public suites diagnose with
formulas alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from grader.testing.catalogue.efficient import formula_suspects
from grader.testing.diagnosis import Suspects, Variant
from grader.testing.variants import causal_keep


def tiled(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    is_causal: bool = False,
    block_size: int = 64,
    max_init: float = float("-inf"),
    rescale_acc: bool = True,
    rescale_den: bool = True,
    per_tile: bool = False,
    drop_ragged: bool = False,
    carry_max: str = "yes",  # "tile": m_new is the tile's own max; "never": m is never updated
) -> torch.Tensor:
    """Online-softmax attention over key tiles in float64 (bottom-right causal), with one step
    changeable."""
    q, k, v = (t.double() for t in (q, k, v))
    L, S = q.shape[-2], k.shape[-2]
    s_all = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if is_causal:
        s_all = s_all.masked_fill(~causal_keep(L, S), float("-inf"))
    m = torch.full((*q.shape[:-1], 1), max_init, dtype=torch.float64)
    den, acc, tiles = (
        torch.zeros_like(m),
        torch.zeros(*q.shape[:-1], v.shape[-1], dtype=torch.float64),
        0,
    )
    stop = S - S % block_size if drop_ragged else S
    for start in range(0, stop, block_size):
        s, vt = s_all[..., start : start + block_size], v[..., start : start + block_size, :]
        if per_tile:
            acc, tiles = acc + torch.softmax(s, dim=-1).nan_to_num(0.0) @ vt, tiles + 1
            continue
        m_new = (
            s.amax(dim=-1, keepdim=True)
            if carry_max == "tile"
            else torch.maximum(m, s.amax(dim=-1, keepdim=True))
        )
        safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p, alpha = torch.exp(s - safe), torch.exp(m - safe)
        den = (alpha if rescale_den else 1.0) * den + p.sum(dim=-1, keepdim=True)
        acc = (alpha if rescale_acc else 1.0) * acc + p @ vt
        m = m if carry_max == "never" else m_new
    if per_tile:
        return acc / max(tiles, 1)
    return acc / torch.where(den == 0, torch.ones_like(den), den)


def flash_suspects(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    is_causal: bool = False,
    block_size: int = 64,
    causal_default: bool = False,
) -> Suspects:
    """What ``flash_attention(q, k, v, is_causal, block_size)`` gives with each misconception
    (``causal_default``: the test left is_causal at its default)."""

    def run(**knobs: Any) -> Callable[[], torch.Tensor]:
        base: dict[str, Any] = {"is_causal": is_causal, "block_size": block_size}
        return lambda: tiled(q, k, v, **{**base, **knobs}).to(q.dtype)

    items = [
        Variant(
            "flash-rescale",
            "the online softmax without rescaling the accumulator by exp(m_old - m_new)",
            run(rescale_acc=False),
        ),
        Variant(
            "flash-rescale",
            "the online softmax without rescaling the denominator by exp(m_old - m_new)",
            run(rescale_den=False),
        ),
        Variant(
            "flash-rescale",
            "the online softmax with neither the accumulator nor the denominator rescaled (alpha "
            "taken after the running max was overwritten: exp(m_new - m_new) = 1)",
            run(rescale_acc=False, rescale_den=False),
        ),
        Variant(
            "flash-rescale",
            "each key tile normalised by its own sum and the tiles' outputs averaged",
            run(per_tile=True),
        ),
        Variant(
            "ragged-dropped",
            f"attention over the first {k.shape[-2] - k.shape[-2] % block_size} keys only "
            f"(the last, shorter tile of {k.shape[-2] % block_size} dropped)",
            run(drop_ragged=True),
        ),
        Variant(
            "flash-rescale",
            "the online softmax whose new max is the tile's own (not the max of the running one "
            "and the tile's)",
            run(carry_max="tile"),
        ),
        Variant(
            "flash-rescale",
            "the online softmax whose running max is never updated (m = m_new missing)",
            run(carry_max="never"),
        ),
        Variant(
            "flash-max-init",
            "the online softmax with the running max started at 0 instead of -inf",
            run(max_init=0.0),
        ),
    ]
    return Suspects(tuple(items)) + formula_suspects(
        q, k, v, is_causal=is_causal, causal_default=causal_default
    )
