"""Bug: padding mask True = pad, nn.MultiheadAttention key_padding_mask convention (source: §3.6 / misconception #7).

Misconception: mask-inverted
"""

import torch


def causal_mask(seq_len, device=None):
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()


def padding_mask(lengths, max_len):
    return torch.arange(max_len)[None, :] >= lengths[:, None]


def to_additive(mask, dtype=torch.float32):
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, float("-inf"))
