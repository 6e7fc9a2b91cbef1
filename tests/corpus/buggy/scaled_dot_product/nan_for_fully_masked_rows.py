"""Bug: plain softmax over a row of -inf gives NaN for a query with no visible key (source: misconception #12).

Misconception: fully-masked-nan
"""

import math

import torch


def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0, scale=None, training=False):
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    scores = (query @ key.transpose(-2, -1)) * scale
    if mask is not None:
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, float("-inf"))
        else:
            scores = scores + mask.to(scores.dtype)
    weights = torch.softmax(scores, dim=-1)
    if training and dropout_p > 0.0:
        weights = torch.nn.functional.dropout(weights, p=dropout_p, training=True)
    return weights @ value, weights
