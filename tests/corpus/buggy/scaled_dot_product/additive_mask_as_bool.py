"""Bug: masked_fill(mask == 0, -inf) for every mask, so additive masks are inverted and biases ignored (source: seed 004 line ~13 / misconception #7).

Misconception: additive-as-bool
"""

import math

import torch


def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0, scale=None, training=False):
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    scores = (query @ key.transpose(-2, -1)) * scale
    if mask is not None:
        scores = scores.masked_fill(mask == 0, float("-inf"))
    blocked = torch.isneginf(scores).all(dim=-1, keepdim=True)
    weights = torch.softmax(scores.masked_fill(blocked, 0.0), dim=-1).masked_fill(blocked, 0.0)
    if training and dropout_p > 0.0:
        weights = torch.nn.functional.dropout(weights, p=dropout_p, training=True)
    return weights @ value, weights
