"""Scaled dot-product attention with einsum and an additive bias (ana)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def scaled_dot_product_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None = None,
    dropout_p: float = 0.0, scale: float | None = None, training: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    assert query.shape[-1] == key.shape[-1], "query and key must have the same last dim E"
    assert key.shape[-2] == value.shape[-2], "key and value must have the same length S"
    assert 0.0 <= dropout_p < 1.0, "dropout_p must be in [0, 1)"
    factor = query.size(-1) ** -0.5 if scale is None else scale
    logits = torch.einsum("...le,...se->...ls", query, key) * factor
    if mask is not None:
        if mask.dtype == torch.bool:
            bias = torch.zeros(mask.shape, dtype=logits.dtype, device=logits.device)
            bias = bias.masked_fill(mask.logical_not(), -math.inf)
        else:
            bias = mask.to(logits.dtype)
        logits = logits + bias
    dead = (logits == -math.inf).all(-1, keepdim=True)
    probs = F.softmax(torch.where(dead, torch.zeros_like(logits), logits), dim=-1)
    probs = torch.where(dead, torch.zeros_like(probs), probs)
    if training:
        probs = F.dropout(probs, dropout_p)
    return torch.einsum("...ls,...sv->...lv", probs, value), probs
