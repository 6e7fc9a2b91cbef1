"""Honest (einsum for both products)."""
import math

import torch
import torch.nn.functional as F


def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0, scale=None, training=False):
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    scores = torch.einsum("...le,...se->...ls", query, key) * scale
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask.to(scores.dtype)
    empty = torch.isneginf(scores).all(-1, keepdim=True)
    weights = torch.exp(scores.masked_fill(empty, 0.0) - scores.masked_fill(empty, 0.0).amax(-1, keepdim=True))
    weights = (weights / weights.sum(-1, keepdim=True)).masked_fill(empty, 0.0)
    if training and dropout_p > 0:
        weights = F.dropout(weights, dropout_p, training=True)
    return torch.einsum("...ls,...sv->...lv", weights, value), weights
