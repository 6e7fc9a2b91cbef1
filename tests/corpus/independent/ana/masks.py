"""Masks by comparing positions (ana)."""

from __future__ import annotations

import torch


def causal_mask(seq_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    assert seq_len >= 0, "seq_len must be non-negative"
    idx = torch.arange(seq_len, device=device)
    return idx[:, None] >= idx[None, :]


def padding_mask(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    assert lengths.dim() == 1, "lengths must be a 1-D tensor of sequence lengths"
    cols = torch.arange(max_len, device=lengths.device).expand(lengths.numel(), max_len)
    return cols < lengths.unsqueeze(1)


def to_additive(mask: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    assert mask.dtype == torch.bool, "to_additive expects a boolean mask (True = may attend)"
    zero = torch.tensor(0.0, dtype=dtype, device=mask.device)
    return torch.where(mask, zero, torch.tensor(float("-inf"), dtype=dtype, device=mask.device))
