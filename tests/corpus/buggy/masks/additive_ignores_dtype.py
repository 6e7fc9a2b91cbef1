"""Bug: to_additive always returns float32 whatever `dtype` says (source: seed 001 torch.zeros without dtype).

Misconception: dtype-ignored
"""

import torch


def causal_mask(seq_len, device=None):
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()


def padding_mask(lengths, max_len):
    return torch.arange(max_len, device=lengths.device)[None, :] < lengths[:, None]


def to_additive(mask, dtype=torch.float32):
    return torch.zeros(mask.shape, device=mask.device).masked_fill(~mask, float("-inf"))
