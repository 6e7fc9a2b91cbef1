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

from .softmax import softmax_stable

_HALF_DTYPES = (torch.float16, torch.bfloat16)


def _check_operand(tensor: torch.Tensor, name: str) -> None:
    """query / key / value: a floating point tensor with at least the two last dims."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    if tensor.dim() < 2:
        raise ValueError(f"{name} must have at least 2 dims (..., length, features), got {tuple(tensor.shape)}")
    if not torch.is_floating_point(tensor):
        raise TypeError(f"{name} must be a floating point tensor, got dtype {tensor.dtype}")


def _check_number(value: float, name: str) -> float:
    """A real Python number (bool excluded), returned as a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    return float(value)


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
    _check_operand(query, "query")
    _check_operand(key, "key")
    _check_operand(value, "value")
    assert query.shape[-1] == key.shape[-1], "query and key must have the same last dim E"
    assert key.shape[-2] == value.shape[-2], "key and value must have the same length S"
    dropout_p = _check_number(dropout_p, "dropout_p")
    assert 0.0 <= dropout_p < 1.0, "dropout_p must be in [0, 1)"
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p}")
    if not isinstance(training, bool):
        raise TypeError(f"training must be a bool, got {type(training).__name__}")
    if query.dim() != key.dim() or query.dim() != value.dim():
        raise ValueError(f"query, key and value must have the same number of dims, got "
                         f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
    if query.shape[:-2] != key.shape[:-2] or query.shape[:-2] != value.shape[:-2]:
        raise ValueError(f"the leading (batch) dims must be equal, got {tuple(query.shape[:-2])}, "
                         f"{tuple(key.shape[:-2])}, {tuple(value.shape[:-2])}")
    if query.dtype != key.dtype or query.dtype != value.dtype:
        raise TypeError(f"query, key and value must share a dtype, got {query.dtype}, {key.dtype}, {value.dtype}")
    if query.device != key.device or query.device != value.device:
        raise ValueError(f"query, key and value must be on one device, got {query.device}, {key.device}, "
                         f"{value.device}")
    embed_dim = int(query.shape[-1])
    if embed_dim < 1:
        raise ValueError("the feature dim E must be at least 1")
    if scale is None:
        scale_value = 1.0 / math.sqrt(embed_dim)
    else:
        scale_value = _check_number(scale, "scale")
        if not math.isfinite(scale_value):
            raise ValueError(f"scale must be finite, got {scale_value}")

    num_queries, num_keys = int(query.shape[-2]), int(key.shape[-2])
    scores_shape = torch.Size((*query.shape[:-2], num_queries, num_keys))
    if mask is not None:
        if not isinstance(mask, torch.Tensor):
            raise TypeError(f"mask must be None or a torch.Tensor, got {type(mask).__name__}")
        if mask.dtype != torch.bool and not torch.is_floating_point(mask):
            raise TypeError(f"mask must be boolean (True = may attend) or floating point (additive), "
                            f"got dtype {mask.dtype}")
        try:
            broadcast = torch.broadcast_shapes(mask.shape, scores_shape)
        except RuntimeError as exc:
            raise ValueError(f"mask of shape {tuple(mask.shape)} does not broadcast to the scores' shape "
                             f"{tuple(scores_shape)}") from exc
        if broadcast != scores_shape:
            raise ValueError(f"mask of shape {tuple(mask.shape)} would enlarge the scores' shape "
                             f"{tuple(scores_shape)}")
        mask = mask.to(query.device)

    # half precision: the whole computation in float32, results cast back to the dtype of query
    compute_dtype = torch.float32 if query.dtype in _HALF_DTYPES else query.dtype
    q = query.to(compute_dtype)
    k = key.to(compute_dtype)
    v = value.to(compute_dtype)

    # query (..., L, E) and key (..., S, E) -> scores, weights: (..., L, S); output: (..., L, Ev)
    raw_scores = q @ k.transpose(-2, -1)
    scaled_scores = raw_scores * scale_value
    if mask is None:
        masked_scores = scaled_scores
    elif mask.dtype == torch.bool:
        masked_scores = scaled_scores.masked_fill(~mask, float("-inf"))
    else:
        masked_scores = scaled_scores + mask.to(compute_dtype)

    # a query with every key blocked: give it finite scores for the softmax, then zero its row
    no_key_rows = torch.isneginf(masked_scores).all(dim=-1, keepdim=True)  # (..., L, 1)
    safe_scores = masked_scores.masked_fill(no_key_rows, 0.0)
    weights = softmax_stable(safe_scores, dim=-1)
    weights = weights.masked_fill(no_key_rows, 0.0)

    if training and dropout_p > 0.0:
        # zero each weight with probability p, scale the survivors by 1 / (1 - p)
        weights = F.dropout(weights, p=dropout_p, training=True)

    # the output comes from the weights at working precision (identical for float32 / float64 inputs)
    output = (weights @ v).to(query.dtype)
    weights_out = weights.to(query.dtype)
    return output, weights_out
