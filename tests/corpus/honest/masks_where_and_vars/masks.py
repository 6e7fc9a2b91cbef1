"""Honest (torch.where, and a variable named `vars`)."""
import torch


def causal_mask(seq_len, device=None):
    vars = torch.ones(seq_len, seq_len, device=device)
    return torch.tril(vars).bool()


def padding_mask(lengths, max_len):
    vars = torch.arange(max_len, device=lengths.device).expand(len(lengths), max_len)
    return vars < lengths[:, None]


def to_additive(mask, dtype=torch.float32):
    zero = torch.tensor(0.0, dtype=dtype, device=mask.device)
    return torch.where(mask, zero, torch.tensor(float("-inf"), dtype=dtype, device=mask.device))
