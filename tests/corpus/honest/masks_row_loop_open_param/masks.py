"""Honest (loops over rows, and a keyword parameter named `open`)."""
import torch


def causal_mask(seq_len, device=None, open=False):
    mask = torch.zeros(seq_len, seq_len, dtype=torch.bool, device=device)
    for i in range(seq_len):
        mask[i, : i + 1] = True if not open else True
    return mask


def padding_mask(lengths, max_len):
    positions = torch.arange(max_len, device=lengths.device)
    rows = [positions < lengths[b] for b in range(lengths.shape[0])]
    if not rows:
        return torch.zeros(0, max_len, dtype=torch.bool, device=lengths.device)
    return torch.stack(rows)


def to_additive(mask, dtype=torch.float32):
    return torch.zeros((), dtype=dtype, device=mask.device).expand(mask.shape).masked_fill(~mask, float("-inf"))
