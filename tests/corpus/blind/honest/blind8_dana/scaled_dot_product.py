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
import torch.nn.functional as F


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Half-precision inputs are computed in float32 (and cast back at the end)."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _safe_softmax(scores: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim that maps a row of all -inf to a row of zeros instead of NaN."""
    top = scores.amax(dim=-1, keepdim=True).detach()
    top = top.masked_fill(torch.isneginf(top), 0.0)  # a fully blocked row: exp(-inf - 0) = 0 everywhere
    expd = torch.exp(scores - top)
    total = expd.sum(dim=-1, keepdim=True)
    return expd / total.masked_fill(total == 0, 1.0)


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
    work = _compute_dtype(query.dtype)
    q, k, v = (t.to(work) for t in (query, key, value))
    factor = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = torch.einsum("...le,...se->...ls", q, k) * factor
    if mask is not None:
        if mask.dtype == torch.bool:
            scores = torch.where(mask, scores, float("-inf"))  # True = may attend
        else:
            scores = scores + mask.to(work)
    weights = _safe_softmax(scores)
    if training and dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p, training=True)
    output = weights @ v
    return output.to(query.dtype), weights.to(query.dtype)
