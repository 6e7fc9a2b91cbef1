"""Honest (uses the shared helper module attn_utils)."""
import torch.nn.functional as F

from .attn_utils import masked_softmax, scaled


def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0, scale=None, training=False):
    weights = masked_softmax(scaled(query, key, scale), mask)
    if training and dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p, training=True)
    return weights @ value, weights
