"""Honest (broadcast comparisons instead of tril)."""
import torch


def causal_mask(seq_len, device=None):
    idx = torch.arange(seq_len, device=device)
    return idx[:, None] >= idx[None, :]


def padding_mask(lengths, max_len):
    return torch.arange(max_len, device=lengths.device).unsqueeze(0) < lengths.unsqueeze(1)


def to_additive(mask, dtype=torch.float32):
    out = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    out[~mask] = float("-inf")
    return out
