"""Bug: causal_mask returns torch.triu(ones, diagonal=1), the "1 means masked" matrix, so it is True strictly ABOVE the diagonal (the future) and False on and below it: the SDPA keep-convention is inverted.

Misconception: mask-inverted
Held out: yes
Source: seed notebook 003_eef2211e07fb1ee1.txt ("Create a fixed causal mask (upper triangular) [1 means mask]"); written from scratch
"""

import torch


def causal_mask(seq_len: int, device=None) -> torch.Tensor:
    assert seq_len >= 0, "seq_len must be non-negative"
    # upper triangular: the future tokens
    mask = torch.triu(torch.ones(seq_len, seq_len, device=device), diagonal=1)
    return mask.bool()


def padding_mask(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    assert lengths.dim() == 1, "lengths must be a 1-D tensor of sequence lengths"
    B = lengths.shape[0]
    rng = torch.arange(max_len, device=lengths.device).expand(B, max_len)
    return rng < lengths.unsqueeze(-1)


def to_additive(mask: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    assert mask.dtype == torch.bool, "to_additive expects a boolean mask (True = may attend)"
    out = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    out[~mask] = float("-inf")
    return out
