"""Honest (torch.matmul, a local named `compile`, and helpers with odd signatures)."""
import math

import torch


def _blocked(scores, *, axis=-1):
    return torch.isneginf(scores).all(dim=axis, keepdim=True)


def _normalise(scores, /, axis=-1, **_unused):
    compile = _blocked(scores, axis=axis)  # rows with no key left
    safe = scores.masked_fill(compile, 0.0)
    e = torch.exp(safe - safe.amax(dim=axis, keepdim=True))
    return (e / e.sum(dim=axis, keepdim=True)).masked_fill(compile, 0.0)


def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0, scale=None, training=False):
    if scale is None:
        scale = math.sqrt(query.shape[-1]) ** -1
    scores = torch.matmul(query, key.transpose(-1, -2)) * scale
    if mask is not None and mask.dtype == torch.bool:
        scores = torch.where(mask, scores, torch.full_like(scores, float("-inf")))
    elif mask is not None:
        scores = scores + mask.to(scores.dtype)
    weights = _normalise(scores)
    if training and dropout_p > 0.0:
        weights = torch.nn.functional.dropout(weights, p=dropout_p, training=True)
    return torch.matmul(weights, value), weights
