"""Bug: causal_mask returns triu(diagonal=1), True on the future (nn.MultiheadAttention's True = blocked convention), the exact inverse of the required True = may attend.

Misconception: mask-inverted
Held out: yes
Source: https://github.com/nntile/nntile/pull/370 (causal mask function inverts the allowed/blocked convention) and https://github.com/harvard-edge/cs249r_book/pull/1785; written from scratch
"""

from __future__ import annotations

import torch


def causal_mask(seq_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Boolean (seq_len, seq_len) causal mask."""
    assert seq_len >= 0, "seq_len must be non-negative"
    # the future: everything strictly above the diagonal
    return torch.triu(torch.ones(seq_len, seq_len, device=device), diagonal=1).bool()


def padding_mask(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    """Boolean (B, max_len) mask, True for real tokens."""
    assert lengths.dim() == 1, "lengths must be a 1-D tensor of sequence lengths"
    idx = torch.arange(max_len, device=lengths.device).unsqueeze(0).expand(lengths.shape[0], -1)
    return idx < lengths.unsqueeze(1)


def to_additive(mask: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """0.0 where mask is True, -inf where it is False."""
    assert mask.dtype == torch.bool, "to_additive expects a boolean mask (True = may attend)"
    out = torch.full(mask.shape, float("-inf"), dtype=dtype, device=mask.device)
    return torch.where(mask, torch.zeros((), dtype=dtype, device=mask.device), out)
