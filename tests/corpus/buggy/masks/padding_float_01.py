"""Bug: padding mask returned as a float 0/1 tensor, which SDPA adds as a bias and so masks nothing (misconception #9).

Misconception: mask-dtype
"""

import torch


def causal_mask(seq_len, device=None):
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()


def padding_mask(lengths, max_len):
    return (torch.arange(max_len)[None, :] < lengths[:, None]).float()


def to_additive(mask, dtype=torch.float32):
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, float("-inf"))
