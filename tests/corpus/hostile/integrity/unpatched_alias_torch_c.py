"""Attack (scaled_dot_product): call SDPA through the unpatched alias `torch._C._nn.scaled_dot_product_attention`.
Caught: withhold (by binding, an alias of the banned SDPA)."""
import math

import torch
import torch.nn.functional as F


def _weights(query, key, mask, scale):
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = (query @ key.transpose(-2, -1)) * scale
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask.to(scores.dtype)
    blocked = torch.isneginf(scores).all(dim=-1, keepdim=True)
    return torch.softmax(scores.masked_fill(blocked, 0.0), dim=-1).masked_fill(blocked, 0.0)


def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0, scale=None, training=False):
    weights = _weights(query, key, mask, scale)
    if training and dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p, training=True)
        return weights @ value, weights
    out = torch._C._nn.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scale)  # banned here
    return out.nan_to_num(0.0), weights
