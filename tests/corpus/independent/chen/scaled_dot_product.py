"""Scaled dot-product attention with a hand-made softmax (chen)."""

from __future__ import annotations

import math

import torch


def scaled_dot_product_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None = None,
    dropout_p: float = 0.0, scale: float | None = None, training: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    assert query.shape[-1] == key.shape[-1], "query and key must have the same last dim E"
    assert key.shape[-2] == value.shape[-2], "key and value must have the same length S"
    assert 0.0 <= dropout_p < 1.0, "dropout_p must be in [0, 1)"
    s = query @ key.mT * (1 / math.sqrt(query.shape[-1]) if scale is None else scale)
    if mask is not None:
        s = s.masked_fill(~mask, -math.inf) if mask.dtype == torch.bool else s + mask.to(s.dtype)
    top = s.amax(-1, keepdim=True).nan_to_num(0.0, 0.0, 0.0)
    e = (s - top).exp()
    w = e / e.sum(-1, keepdim=True).clamp_min(torch.finfo(e.dtype).tiny)
    w = torch.dropout(w, dropout_p, training)
    return w @ value, w
