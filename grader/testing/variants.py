"""Attention by formula, in float64, with one thing changeable: what the catalogue's wrong variants
compute.

Every knob at its default gives the right answer (scaled dot-product attention, softmax over the
keys, the mask applied before the softmax, rows with no key left all zero as SDPA gives them); a
variant changes one knob, as a student's one mistake would. Plain formulas on plain tensors, trusted
and shippable (nothing here is an exercise's solution: the exercises ask for these computations
written in other ways, tiled, cached, batched).
"""

from __future__ import annotations

import math

import torch

__all__ = ["attention", "causal_keep", "softmax"]


def softmax(
    s: torch.Tensor, dim: int = -1, *, naive: bool = False, keepdim: bool = True
) -> torch.Tensor:
    """Softmax along ``dim``; ``naive``: without the max subtracted, so it overflows as a student's
    does (compute it in the student's dtype); ``keepdim=False``: the sum broadcast as a student's
    forgotten keepdim does (or raises as theirs does)."""
    e = torch.exp(s if naive else s - s.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=keepdim)


def causal_keep(
    L: int, S: int, *, align: str = "bottom-right", device: torch.device | None = None
) -> torch.Tensor:
    """(L, S) True where query i may see key j: ``bottom-right`` (query i at position S - L + i,
    SDPA's ``causal_lower_right``), ``top-left`` (query i at position i, SDPA's own is_causal),
    ``inverted`` (the bottom-right mask negated), ``strict`` (the bottom-right mask without its
    diagonal) or ``ahead`` (one key more: the next one)."""
    i = torch.arange(L, device=device)[:, None]
    j = torch.arange(S, device=device)[None, :]
    if align == "top-left":
        return j <= i
    keep = j <= i + (S - L)
    if align == "inverted":
        return ~keep
    if align == "strict":
        return j < i + (S - L)
    if align == "ahead":
        return j <= i + (S - L) + 1
    return keep


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    scale: float | None = None,
    keep: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    bias_before_scale: bool = False,
    softmax_dim: int = -1,
    naive: bool = False,
    mask_after_softmax: bool = False,
    fill: float = float("-inf"),
    dead_rows_zero: bool = True,
    dtype: torch.dtype = torch.float64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(output, weights) of softmax(q k^T * scale + bias, masked by ``keep``) v, computed in
    ``dtype``.

    Knobs: ``scale`` (None: 1/sqrt(E)); ``keep`` (bool, broadcastable to (..., L, S), True = may
    attend); ``bias`` added after the scaling, or before it with ``bias_before_scale``;
    ``softmax_dim``; ``naive`` (no max subtracted); ``mask_after_softmax`` (the blocked weights
    zeroed after a softmax over every key, rows not renormalised); ``fill`` (what blocked scores
    become); ``dead_rows_zero`` (False: a row with no key is what the softmax makes of it, NaN for
    -inf)."""
    q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    s = q @ k.transpose(-2, -1)
    if bias is not None and bias_before_scale:
        s = s + bias.to(dtype)
    s = s * (1.0 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if bias is not None and not bias_before_scale:
        s = s + bias.to(dtype)
    blocked = None if keep is None else ~keep
    if blocked is not None and not mask_after_softmax:
        s = s.masked_fill(blocked, fill)
    dead = torch.isneginf(s).all(dim=softmax_dim, keepdim=True) if dead_rows_zero else None
    w = softmax(s if dead is None else s.masked_fill(dead, 0.0), softmax_dim, naive=naive)
    if dead is not None:
        w = w.masked_fill(dead, 0.0)
    if blocked is not None and mask_after_softmax:
        w = w.masked_fill(blocked, 0.0)
    return w @ v, w
