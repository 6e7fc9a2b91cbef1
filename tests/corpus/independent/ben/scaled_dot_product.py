"""Scaled dot-product attention, one step a line (ben)."""

from __future__ import annotations

import torch
from torch import nn


def scaled_dot_product_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None = None,
    dropout_p: float = 0.0, scale: float | None = None, training: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    assert query.shape[-1] == key.shape[-1], "query and key must have the same last dim E"
    assert key.shape[-2] == value.shape[-2], "key and value must have the same length S"
    assert 0.0 <= dropout_p < 1.0, "dropout_p must be in [0, 1)"
    d = query.shape[-1]
    if scale is None:
        scale = 1 / d ** 0.5
    key_t = key.transpose(-1, -2)
    raw = torch.matmul(query, key_t)
    scaled = raw * scale
    if mask is not None:
        if mask.dtype is torch.bool:
            scaled = torch.masked_fill(scaled, mask.logical_not(), -float("inf"))
        else:
            scaled = scaled + mask.to(scaled.dtype)
    row_max = scaled.max(dim=-1, keepdim=True).values
    all_blocked = row_max == -float("inf")
    safe = torch.where(all_blocked, torch.zeros_like(scaled), scaled)
    weights = safe.softmax(dim=-1)
    weights = weights * (~all_blocked)
    if training and dropout_p > 0:
        weights = nn.functional.dropout(weights, dropout_p)
    output = torch.matmul(weights, value)
    return output, weights
