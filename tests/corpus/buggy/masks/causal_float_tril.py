"""Bug: causal mask of the right values but dtype float, torch.tril(torch.ones(T, T)) (source: seed 003 line ~353 / misconception #9).

Misconception: mask-dtype
"""

import torch


def causal_mask(seq_len, device=None):
    return torch.tril(torch.ones(seq_len, seq_len, device=device))


def padding_mask(lengths, max_len):
    return torch.arange(max_len, device=lengths.device)[None, :] < lengths[:, None]


def to_additive(mask, dtype=torch.float32):
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, float("-inf"))
