"""Bug: to_additive puts -inf where the mask is True (allowed) and 0 where it is False (misconception #7).

Misconception: mask-inverted
"""

import torch


def causal_mask(seq_len, device=None):
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()


def padding_mask(lengths, max_len):
    return torch.arange(max_len, device=lengths.device)[None, :] < lengths[:, None]


def to_additive(mask, dtype=torch.float32):
    return torch.zeros(mask.shape, dtype=dtype).masked_fill(mask, float("-inf"))
