"""Bug: causal_mask returns the 0/-inf additive mask instead of a boolean one (source: seed 003 line ~355).

Misconception: mask-dtype
"""

import torch


def causal_mask(seq_len, device=None):
    mask = torch.tril(torch.ones(seq_len, seq_len, device=device))
    return mask.masked_fill(mask == 0, float("-inf")).masked_fill(mask == 1, 0.0)


def padding_mask(lengths, max_len):
    return torch.arange(max_len, device=lengths.device)[None, :] < lengths[:, None]


def to_additive(mask, dtype=torch.float32):
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, float("-inf"))
