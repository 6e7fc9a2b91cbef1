"""Honest (the function is an instance of a callable class; __call__ with an odd signature)."""
import math

import torch
import torch.nn.functional as F


class _ScaledDotProduct:
    def __init__(self, neg=float("-inf")):
        self.neg = neg

    def __call__(self, query, key, value, mask=None, dropout_p=0.0, scale=None, training=False, **_ignored):
        scale = scale if scale is not None else query.shape[-1] ** -0.5
        scores = query @ key.transpose(-2, -1) * scale
        if mask is not None:
            scores = scores.masked_fill(~mask, self.neg) if mask.dtype == torch.bool else scores + mask.to(scores.dtype)
        dead = (scores == self.neg).all(-1, keepdim=True)
        scores = scores.masked_fill(dead, 0.0)
        e = torch.exp(scores - scores.amax(-1, keepdim=True))
        weights = (e / e.sum(-1, keepdim=True)).masked_fill(dead, 0.0)
        if training and dropout_p > 0:
            weights = F.dropout(weights, p=dropout_p, training=True)
        return weights @ value, weights

    def __repr__(self):
        return f"scaled_dot_product_attention(neg={self.neg}, inf={math.inf})"


scaled_dot_product_attention = _ScaledDotProduct()
