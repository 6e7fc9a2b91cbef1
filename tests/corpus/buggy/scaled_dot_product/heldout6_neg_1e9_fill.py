"""Bug: boolean masks are filled with -1e9 instead of -inf, so a query whose keys are all blocked gets uniform weights and the mean of the values instead of zero weights and a zero output.

Misconception: mask-fill-finite
Held out: yes
Source: 004_b24f427063e28fba.txt: scores.masked_fill(mask == 0, -1e9); written from scratch
"""

from __future__ import annotations

import math

import torch


def scaled_dot_product_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                                 mask: torch.Tensor | None = None, dropout_p: float = 0.0,
                                 scale: float | None = None,
                                 training: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention; returns `(output, weights)`.

    Args:
        query: (..., L, E).  key: (..., S, E).  value: (..., S, Ev).
        mask: None, a bool tensor (True = may attend) or a float tensor added to the scaled
            scores; broadcastable to (..., L, S).
        dropout_p: probability of zeroing an attention weight; used only when `training`.
        scale: multiplies Q K^T; None means 1 / sqrt(E).
        training: dropout is applied only when True (with training=False, no dropout at all).

    Returns:
        output (..., L, Ev) and weights (..., L, S), both in the dtype of `query`. Each row of
        `weights` sums to 1 (before dropout), except rows whose keys are all masked: those rows
        are all zero, and so is their output. With dropout, `weights` are the dropped and rescaled
        weights and `output == weights @ value`.
    """
    assert query.shape[-1] == key.shape[-1], "query and key must have the same last dim E"
    assert key.shape[-2] == value.shape[-2], "key and value must have the same length S"
    assert 0.0 <= dropout_p < 1.0, "dropout_p must be in [0, 1)"
    # query (..., L, E) and key (..., S, E) -> scores, weights: (..., L, S); output: (..., L, Ev)
    d_k = query.size(-1)
    if scale is None:
        scale = 1 / math.sqrt(d_k)
    scores = torch.matmul(query, key.transpose(-2, -1)) * scale
    if mask is not None:
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(mask == False, -1e9)  # noqa: E712
        else:
            scores = scores + mask
    all_masked = torch.all(scores == float("-inf"), dim=-1, keepdim=True)
    scores = torch.where(all_masked, torch.zeros_like(scores), scores)
    attn = torch.softmax(scores, dim=-1)
    attn = torch.where(all_masked, torch.zeros_like(attn), attn)
    if training and dropout_p > 0:
        attn = torch.nn.functional.dropout(attn, p=dropout_p, training=True)
    out = torch.matmul(attn, value)
    return out, attn
