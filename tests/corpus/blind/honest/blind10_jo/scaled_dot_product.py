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


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """float16/bfloat16 are widened to float32; float32 and float64 are kept."""
    return torch.promote_types(dtype, torch.float32)


def _softmax_with_empty_rows(scores: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim; a row that is all -inf becomes all zeros instead of NaN."""
    row_max = scores.detach().amax(dim=-1, keepdim=True)
    row_max = torch.where(torch.isneginf(row_max), torch.zeros_like(row_max), row_max)
    exponentials = torch.exp(scores - row_max)
    total = exponentials.sum(dim=-1, keepdim=True)
    return exponentials / torch.where(total > 0, total, torch.ones_like(total))


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
    out_dtype = query.dtype
    work = _compute_dtype(out_dtype)
    *lead, L, E = query.shape
    S, Ev = key.shape[-2], value.shape[-1]
    if scale is None:
        scale = 1.0 / math.sqrt(E)

    q = query.reshape(-1, L, E).to(work)
    k = key.reshape(-1, S, E).to(work)
    v = value.reshape(-1, S, Ev).to(work)
    # beta=0: the (broadcast) input of baddbmm is ignored, only alpha * q @ k^T is kept
    scores = torch.baddbmm(q.new_zeros(1, 1, 1), q, k.transpose(1, 2), beta=0.0, alpha=scale)
    scores = scores.reshape(*lead, L, S)

    if mask is not None:
        if mask.dtype == torch.bool:
            blocked = torch.full((), float("-inf"), dtype=work, device=scores.device)
            scores = torch.where(mask, scores, blocked)
        else:
            scores = scores + mask.to(work)

    weights = _softmax_with_empty_rows(scores)
    if training and dropout_p > 0.0:
        keep = torch.empty_like(weights).bernoulli_(1.0 - dropout_p)
        weights = weights * keep / (1.0 - dropout_p)

    if tuple(weights.shape[:-2]) == tuple(lead):
        output = torch.bmm(weights.reshape(-1, L, S), v).reshape(*lead, L, Ev)
    else:  # a mask with more leading dims than the inputs: let matmul broadcast
        output = torch.matmul(weights, value.to(work))
    return output.to(out_dtype), weights.to(out_dtype)
