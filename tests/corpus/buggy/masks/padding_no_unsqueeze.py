"""Bug: arange(max_len) < lengths without adding the broadcast dims, so positions are compared with the wrong lengths (misconception #8).

Misconception: mask-broadcast
"""

import torch


def causal_mask(seq_len, device=None):
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()


def padding_mask(lengths, max_len):
    return torch.arange(max_len) < lengths


def to_additive(mask, dtype=torch.float32):
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, float("-inf"))
