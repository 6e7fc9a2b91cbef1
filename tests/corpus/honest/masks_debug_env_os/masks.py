"""Honest (reads an environment variable through os for debugging: needs review, costs nothing)."""
import os

import torch

VERBOSE = os.environ.get("MASKS_DEBUG") == "1"


def causal_mask(seq_len, device=None):
    mask = torch.tril(torch.ones(seq_len, seq_len, dtype=torch.bool, device=device))
    if VERBOSE:
        print(mask)
    return mask


def padding_mask(lengths, max_len):
    return torch.arange(max_len, device=lengths.device)[None, :] < lengths[:, None]


def to_additive(mask, dtype=torch.float32):
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, float("-inf"))
