"""FlashAttention's backward misconceptions: the tiled backward with one step changed (D computed
per tile or left out, the scale missing from dQ and dK, left out of dK, or applied to dS as well, dQ
assigned instead of accumulated, the probabilities renormalised per tile or shifted by the tile's
max instead of exp(S - lse), the causal mask aligned top-left or missing, the ragged last key tile
dropped), and the forward's log-sum-exp with one step changed (the running max alone, log(l) alone).

Trusted tiled code, run by the hidden suites only (it is the exercise's backward written tile by
tile: it never ships to students, :data:`grader.release.repository.RUNTIME` leaves it out).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from grader.testing.diagnosis import Detector, Observation, Suspects, Variant, close
from grader.testing.variants import causal_keep

Grads = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def _probabilities(s: torch.Tensor, lse: torch.Tensor, how: str) -> torch.Tensor:
    if how == "raw":
        return torch.exp(s)
    if how == "tile-softmax":
        return torch.softmax(s, dim=-1).nan_to_num(0.0)
    if how == "tile-max":
        m = s.amax(dim=-1, keepdim=True)
        return torch.exp(s - torch.where(torch.isinf(m), torch.zeros_like(m), m))
    return torch.exp(s - torch.where(torch.isinf(lse), torch.zeros_like(lse), lse))


def backward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    do: torch.Tensor,
    is_causal: bool,
    block_size: int,
    *,
    delta: str = "row",
    dq_scale: float = 1.0,
    dk_scale: float = 1.0,
    ds_scale: float = 1.0,
    dq_overwrite: bool = False,
    probs: str = "lse",
    align: str = "bottom-right",
    drop_ragged: bool = False,
    s_scale: float = 1.0,
    d_given: torch.Tensor | None = None,
    cat_dim: int = -2,
) -> Grads:
    """(dq, dk, dv) of FlashAttention-2's backward in float64, key tile by key tile, with one step
    changeable: ``delta`` ("row", "tile": rowsum(P * dP) of the tile, "none"), extra factors on dQ,
    dK, dS (1: right), ``dq_overwrite``, ``probs`` ("lse", "tile-softmax", "tile-max"), ``align`` of
    the causal mask ("none": no mask), ``drop_ragged`` (the shorter last key tile left out: dK, dV
    shorter), ``s_scale`` (a factor on the scores P is recomputed from), ``d_given`` (D itself,
    (..., L, 1), in place of rowsum(dO * O)), ``cat_dim`` (the dim dK's and dV's tiles are
    concatenated along: raises where the student's torch.cat does)."""
    q, k, v, o, do = (t.double() for t in (q, k, v, out, do))
    L, S = q.shape[-2], k.shape[-2]
    scale, row_lse = 1.0 / math.sqrt(q.shape[-1]), lse.double().unsqueeze(-1)
    d = (do * o).sum(dim=-1, keepdim=True) if d_given is None else d_given
    keep = causal_keep(L, S, align=align) if is_causal and align != "none" else None
    dq, dks, dvs = torch.zeros_like(q), [], []
    for start in range(0, S - S % block_size if drop_ragged else S, block_size):
        end = min(start + block_size, S)
        s = q @ k[..., start:end, :].transpose(-2, -1) * scale * s_scale
        if keep is not None:
            s = s.masked_fill(~keep[:, start:end], float("-inf"))
        p = _probabilities(s, row_lse, probs)
        dp = do @ v[..., start:end, :].transpose(-2, -1)
        dd = {
            "row": d,
            "outside": d,
            "tile": (p * dp).sum(dim=-1, keepdim=True),
            "none": torch.zeros_like(d),
            "no-keepdim": d.squeeze(-1),  # (..., L) against (..., L, bs): raises unless L == bs
        }[delta]
        ds = (p * dp - dd if delta == "outside" else p * (dp - dd)) * ds_scale
        step = ds @ k[..., start:end, :] * scale * dq_scale
        dq = step if dq_overwrite else dq + step
        dks.append(ds.transpose(-2, -1) @ q * scale * dk_scale)
        dvs.append(p.transpose(-2, -1) @ do)
    return dq, torch.cat(dks, dim=cat_dim), torch.cat(dvs, dim=cat_dim)


STEPS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    (
        "bwd-delta",
        "the backward with D = rowsum(P * dP) of each key tile instead of rowsum(dO * O) over the whole row",
        {"delta": "tile"},
    ),
    ("bwd-delta", "the backward without D: dS = P * dP", {"delta": "none"}),
    (
        "bwd-scale",
        "the backward with dQ and dK not multiplied by the scale",
        {},
    ),  # factors filled in below
    ("bwd-scale", "the backward with dK not multiplied by the scale", {}),
    ("bwd-scale", "the backward with dS multiplied by the scale too (dQ and dK scaled twice)", {}),
    (
        "bwd-dq-overwritten",
        "the backward with dQ assigned the last key tile's term instead of summed over the tiles",
        {"dq_overwrite": True},
    ),
    (
        "bwd-probabilities",
        "the backward with each tile's probabilities renormalised by a softmax over the tile "
        "instead of exp(S - lse)",
        {"probs": "tile-softmax"},
    ),
    (
        "bwd-probabilities",
        "the backward with each tile's probabilities exp(S - the tile's max) instead of "
        "exp(S - lse)",
        {"probs": "tile-max"},
    ),
    ("ragged-dropped", "the backward without the shorter last tile of keys", {"drop_ragged": True}),
    (
        "bwd-delta",
        "the backward with dS = P * dP - D: D subtracted outside P's product",
        {"delta": "outside"},
    ),
    (
        "bwd-delta",
        "the backward with D = rowsum(dO * O) summed without keepdim, (..., L) against the tile's "
        "(..., L, block_size)",
        {"delta": "no-keepdim"},
    ),
    (
        "bwd-probabilities",
        "the backward with P = exp(S) instead of exp(S - lse): the log-sum-exp not subtracted",
        {"probs": "raw"},
    ),
    (
        "bwd-probabilities",
        "the backward with P recomputed from unscaled scores, exp(Q K^T - lse) instead of "
        "exp(Q K^T * scale - lse)",
        {},
    ),
    (
        "concat-wrong-dim",
        "the backward with dK's and dV's tiles concatenated along the features (dim -1) instead of "
        "the keys (dim -2)",
        {"cat_dim": -1},
    ),
)  # the scale steps' factors are filled in by index (2, 3, 4, 12): new steps go last


def backward_suspects(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    do: torch.Tensor,
    is_causal: bool,
    block_size: int,
    which: int,
) -> Suspects:
    """What gradient ``which`` (0: dq, 1: dk, 2: dv) of ``flash_attention_backward`` is with each
    misconception."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    factors = {
        2: {"dq_scale": 1 / scale, "dk_scale": 1 / scale},
        3: {"dk_scale": 1 / scale},
        4: {"ds_scale": scale},
        12: {"s_scale": 1 / scale},
    }

    def run(**knobs: Any) -> Callable[[], torch.Tensor]:
        return lambda: backward(q, k, v, out, lse, do, is_causal, block_size, **knobs)[which].to(
            q.dtype
        )

    items: list[Variant | Detector] = [
        Variant(mid, says, run(**{**knobs, **factors.get(i, {})}))
        for i, (mid, says, knobs) in enumerate(STEPS)
    ]
    if is_causal:
        if q.shape[-2] != k.shape[-2]:
            items.append(
                Variant(
                    "mask-top-left",
                    "the backward with the causal mask aligned top-left (query i sees "
                    "keys 0..i) where it is bottom-right",
                    run(align="top-left"),
                )
            )
        items.append(Variant("mask-missing", "the backward with no causal mask", run(align="none")))
        items.append(
            Variant(
                "mask-diagonal",
                "the backward with a causal mask that also blocks each query's own key",
                run(align="strict"),
            )
        )
    if which == 0:
        items.append(
            _fitted_delta(
                lambda d: backward(q, k, v, out, lse, do, is_causal, block_size, d_given=d)[0]
            )
        )
    return Suspects(tuple(items))


def _fitted_delta(run: Callable[[torch.Tensor], torch.Tensor]) -> Detector:
    """Any other D per row: dQ is affine in D (dQ(D) = dQ(0) - D * R row by row), so the D that
    gives the student's dQ is read off by least squares, row by row, and named if it reproduces dQ
    exactly."""

    def observe(got: torch.Tensor, expected: torch.Tensor) -> Observation:
        if got.shape != expected.shape or not got.is_floating_point():
            return None
        zero = run(torch.zeros(*got.shape[:-1], 1, dtype=torch.float64))
        r = zero - run(torch.ones(*got.shape[:-1], 1, dtype=torch.float64))
        den = (r * r).sum(-1, keepdim=True)
        d = ((zero - got.double()) * r).sum(-1, keepdim=True) / den.clamp_min(1e-300)
        fitted = zero - d * r
        if not close(got, fitted, 0.0, 0.0) or close(expected, fitted, 0.0, 0.0):
            return None
        return "bwd-delta", (
            "your dQ equals the backward with another D in each row (D is rowsum(dO * O) over the "
            "whole row, computed once before the tiles)"
        )

    return Detector("bwd-delta", observe, last=True)


def lse_suspects(q: torch.Tensor, k: torch.Tensor, is_causal: bool) -> Suspects:
    """What ``flash_forward``'s lse is with each misconception (float64 inside, returned in ``q``'s
    dtype)."""

    def scores() -> torch.Tensor:
        s = q.double() @ k.double().transpose(-2, -1) / math.sqrt(q.shape[-1])
        return s.masked_fill(~causal_keep(*s.shape[-2:]), float("-inf")) if is_causal else s

    def part(which: str) -> Callable[[], torch.Tensor]:
        def go() -> torch.Tensor:
            s = scores()
            m = s.amax(dim=-1)
            return (m if which == "max" else torch.logsumexp(s, dim=-1) - m).to(q.dtype)

        return go

    return Suspects(
        (
            Variant("lse-wrong", "the running max m alone, not m + log(l)", part("max")),
            Variant("lse-wrong", "log(l) alone, without the running max m added", part("log-l")),
        )
    )
