# Generated from solutions/scaled_dot_product.py by `grader build`. Your task: replace each
# `raise NotImplementedError(...)` with working code. Keep the names and signatures.
"""Exercise `scaled_dot_product`: scaled dot-product attention by hand, with masks and dropout.

    Attention(Q, K, V) = softmax(Q K^T * scale + bias) V,   scale = 1 / sqrt(E) by default

Conventions (the same as `F.scaled_dot_product_attention`, which you may NOT call here):
- query (..., L, E), key (..., S, E), value (..., S, Ev): any number of leading batch dims, equal
  in all three; L (queries) may differ from S (keys), Ev may differ from E.
- `mask` is broadcastable to (..., L, S) and is either
  * boolean: True = this query MAY attend to this key, False = blocked;
  * floating point (additive): added to the SCALED scores (0 = allowed, -inf = blocked, or any
    finite bias such as ALiBi's -m * |i - j|).
- A query whose keys are all blocked gets all-zero weights and a zero output (no NaN), as SDPA does.
- Dropout acts on the attention WEIGHTS, only when `training` is True: each weight is zeroed with
  probability `dropout_p` and the survivors are multiplied by 1 / (1 - dropout_p).
- Return `(output, weights)`: output (..., L, Ev), weights (..., L, S) = the weights actually used.
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
        scale = query.shape[-1] ** -0.5
    scores = torch.matmul(query, key.transpose(-2, -1)) * scale  # (..., L, S)

    # blocked[..., i, j] is True where query i may not look at key j
    if mask is None:
        blocked = None
    elif mask.dtype == torch.bool:
        blocked = ~mask
    else:
        scores = scores + mask.to(scores.dtype)  # additive mask / bias on the scaled scores
        blocked = torch.isneginf(scores)

    if blocked is not None:
        # a big finite negative instead of -inf: exp() of it is 0, and a fully blocked row stays NaN-free
        big_neg = torch.finfo(scores.dtype).min
        scores = torch.where(blocked, torch.full_like(scores, big_neg), scores)

    weights = torch.softmax(scores, dim=-1)

    if blocked is not None:
        # rows with no key at all would come out uniform: zero them, as SDPA does
        dead = blocked.all(dim=-1, keepdim=True)
        weights = torch.where(dead, torch.zeros_like(weights), weights)

    if training and dropout_p > 0.0:
        keep = torch.rand_like(weights) >= dropout_p  # each weight survives with probability 1 - p
        weights = weights * keep / (1.0 - dropout_p)

    output = torch.matmul(weights, value)
    return output, weights
