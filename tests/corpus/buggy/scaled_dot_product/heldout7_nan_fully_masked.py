"""Bug: A query whose keys are all masked gets softmax over all -inf, so its weights and output are NaN instead of zero.

Misconception: fully-masked-nan
Held out: yes
Source: https://github.com/tracel-ai/burn/pull/4697 and https://github.com/robertknight/rten/pull/1321 (fully masked attention rows give NaN; SDPA returns zeros); written from scratch
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def scaled_dot_product_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                                 mask: torch.Tensor | None = None, dropout_p: float = 0.0,
                                 scale: float | None = None,
                                 training: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q K^T * scale + bias) V; returns (output, weights)."""
    assert query.shape[-1] == key.shape[-1], "query and key must have the same last dim E"
    assert key.shape[-2] == value.shape[-2], "key and value must have the same length S"
    assert 0.0 <= dropout_p < 1.0, "dropout_p must be in [0, 1)"
    factor = scale if scale is not None else 1.0 / math.sqrt(query.size(-1))
    logits = torch.matmul(query, key.transpose(-1, -2)) * factor
    if mask is not None:
        if mask.dtype == torch.bool:
            bias = torch.zeros(mask.shape, dtype=logits.dtype, device=logits.device)
            bias = bias.masked_fill(mask.logical_not(), float("-inf"))
        else:
            bias = mask.to(logits.dtype)
        logits = logits + bias
    attn = torch.softmax(logits, dim=-1)
    if training and dropout_p > 0.0:
        attn = F.dropout(attn, p=dropout_p, training=True)
    return torch.matmul(attn, value), attn
