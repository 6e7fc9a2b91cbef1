"""Bug: causal mask = torch.triu(ones, diagonal=1).bool(), the BLOCKED set used as the keep-mask (source: rasbt #1061; seed 003 line ~532 / misconception #7).

Misconception: mask-inverted
"""

import torch


def causal_mask(seq_len, device=None):
    return torch.triu(torch.ones(seq_len, seq_len, device=device), diagonal=1).bool()


def padding_mask(lengths, max_len):
    return torch.arange(max_len, device=lengths.device)[None, :] < lengths[:, None]


def to_additive(mask, dtype=torch.float32):
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, float("-inf"))
