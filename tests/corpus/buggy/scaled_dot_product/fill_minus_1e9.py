"""Bug: fills blocked scores with -1e9: raises in float16, fully-masked rows get uniform weights (source: seed 004 line ~13 / misconception #13).

Misconception: mask-fill-finite
"""

import math

import torch


def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0, scale=None, training=False):
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    scores = (query @ key.transpose(-2, -1)) * scale
    if mask is not None:
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, -1e9)
        else:
            scores = scores + mask.to(scores.dtype)
    weights = torch.softmax(scores, dim=-1)
    if training and dropout_p > 0.0:
        weights = torch.nn.functional.dropout(weights, p=dropout_p, training=True)
    return weights @ value, weights
