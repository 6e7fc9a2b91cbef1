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
    query_dtype = query.dtype
    num_queries = query.shape[-2]
    num_keys = key.shape[-2]
    embed_dim = query.shape[-1]

    # step 1: the scale factor, 1 / sqrt(E) unless the caller gave one
    if scale is None:
        scale_factor = 1.0 / math.sqrt(embed_dim)
    else:
        scale_factor = scale

    # step 2: raw dot products of every query with every key, then scaled
    # (transpose only the last two dims of key: (..., S, E) -> (..., E, S))
    key_transposed = key.transpose(-2, -1)
    raw_scores = query @ key_transposed
    scaled_scores = raw_scores * scale_factor
    assert scaled_scores.shape[-2:] == (num_queries, num_keys)

    # step 3: apply the mask, if any
    if mask is None:
        masked_scores = scaled_scores
    elif mask.dtype == torch.bool:
        # boolean mask: True = may attend, False = blocked -> blocked scores become -inf
        masked_scores = torch.where(mask, scaled_scores, float("-inf"))
    else:
        # floating point mask: added to the scaled scores (cast so half inputs stay half)
        additive_mask = mask.to(scaled_scores.dtype)
        masked_scores = scaled_scores + additive_mask

    # step 4: find the queries whose keys are ALL blocked; softmax of a row of -inf is NaN,
    # so I give those rows harmless zeros here and zero their weights after the softmax
    blocked_positions = masked_scores == float("-inf")
    row_is_fully_blocked = blocked_positions.all(dim=-1, keepdim=True)
    safe_scores = masked_scores.masked_fill(row_is_fully_blocked, 0.0)

    # step 5: softmax over the keys (torch.softmax subtracts the row max, so it is stable);
    # half precision inputs get a float32 softmax and are cast back
    if query_dtype in (torch.float16, torch.bfloat16):
        weights = torch.softmax(safe_scores.to(torch.float32), dim=-1).to(query_dtype)
    else:
        weights = torch.softmax(safe_scores, dim=-1)
    weights = weights.masked_fill(row_is_fully_blocked, 0.0)

    # step 6: dropout on the weights, only in training mode: each weight is zeroed with
    # probability dropout_p and the survivors are multiplied by 1 / (1 - dropout_p)
    if training and dropout_p > 0.0:
        keep_probability = 1.0 - dropout_p
        random_numbers = torch.rand(weights.shape, device=weights.device)
        keep_mask = random_numbers < keep_probability
        weights = weights.masked_fill(~keep_mask, 0.0) / keep_probability

    # step 7: the output is the weighted sum of the values
    output = weights @ value
    output = output.to(query_dtype)
    weights = weights.to(query_dtype)
    assert output.shape[-2] == num_queries and output.shape[-1] == value.shape[-1]
    assert weights.shape[-2:] == (num_queries, num_keys)
    return output, weights
