"""Bug: in training mode with dropout the output uses the dropped weights but the returned `weights` are the softmax weights before dropout, so `output != weights @ value` and the returned weights are not the ones actually used.

Misconception: weights-before-dropout
Held out: yes
Source: classic learner slip (returning the attention map saved before nn.Dropout); from the reference
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
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    scores = (query @ key.transpose(-2, -1)) * scale  # (..., L, E) @ (..., E, S) -> (..., L, S)
    if mask is not None:
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, float("-inf"))  # True = attend: block where False
        else:
            scores = scores + mask.to(scores.dtype)  # additive bias, added AFTER scaling (as SDPA does)
    # -inf (not -1e9): representable in every float dtype, and it gives exactly zero weight.
    blocked = torch.isneginf(scores).all(dim=-1, keepdim=True)  # (..., L, 1): rows with no key left
    scores = scores.masked_fill(blocked, 0.0)  # avoid softmax(all -inf) = NaN
    weights = torch.softmax(scores, dim=-1)  # (..., L, S): normalise over the KEYS
    weights = weights.masked_fill(blocked, 0.0)  # a fully-masked query attends to nothing
    used = weights
    if training and dropout_p > 0.0:
        used = torch.nn.functional.dropout(weights, p=dropout_p, training=True)  # zero, then * 1/(1-p)
    output = used @ value  # (..., L, S) @ (..., S, Ev) -> (..., L, Ev)
    return output, weights
