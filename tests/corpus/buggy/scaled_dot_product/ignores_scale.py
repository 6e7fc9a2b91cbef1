"""Bug: ignores the `scale` argument and always uses 1/sqrt(E) (source: SDPA section 3.1 / misconception #5).

Misconception: scale-argument-ignored
"""

import math

import torch


def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0, scale=None, training=False):
    scale = 1.0 / math.sqrt(query.shape[-1])
    scores = (query @ key.transpose(-2, -1)) * scale
    if mask is not None:
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, float("-inf"))
        else:
            scores = scores + mask.to(scores.dtype)
    blocked = torch.isneginf(scores).all(dim=-1, keepdim=True)
    weights = torch.softmax(scores.masked_fill(blocked, 0.0), dim=-1).masked_fill(blocked, 0.0)
    if training and dropout_p > 0.0:
        weights = torch.nn.functional.dropout(weights, p=dropout_p, training=True)
    return weights @ value, weights
