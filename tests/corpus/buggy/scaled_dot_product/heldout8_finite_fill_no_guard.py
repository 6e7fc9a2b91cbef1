"""Bug: blocked positions of a boolean mask are filled with the finite -1e9 (`masked_fill(mask == 0, -1e9)`) and fully masked rows are not special-cased, so a query whose keys are all blocked gets uniform weights (the mean of V) instead of zero weights and a zero output, and float16 scores cannot even hold -1e9 (masked_fill raises).

Misconception: mask-fill-finite
Held out: yes
Source: seed notebook 004_b24f427063e28fba.txt (`scores.masked_fill(mask == 0, -1e9)` in its self_attention); written from scratch
"""

import math

import torch


def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0, scale=None, training=False):
    """softmax(Q K^T * scale + mask) V, returns (output, weights)."""
    assert query.shape[-1] == key.shape[-1], "query and key must have the same last dim E"
    assert key.shape[-2] == value.shape[-2], "key and value must have the same length S"
    assert 0.0 <= dropout_p < 1.0, "dropout_p must be in [0, 1)"
    d_k = query.size(-1)
    if scale is None:
        scale = 1 / math.sqrt(d_k)
    scores = torch.matmul(query, key.transpose(-2, -1)) * scale

    if mask is not None:
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(mask == 0, -1e9)
        else:
            scores = scores + mask

    attention_weights = torch.softmax(scores, dim=-1)
    if training and dropout_p > 0:
        attention_weights = torch.nn.functional.dropout(attention_weights, p=dropout_p, training=True)
    output = torch.matmul(attention_weights, value)
    return output, attention_weights
