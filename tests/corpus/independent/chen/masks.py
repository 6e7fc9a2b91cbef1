"""Masks in one line each (chen)."""

from __future__ import annotations

import torch


def causal_mask(seq_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    assert seq_len >= 0, "seq_len must be non-negative"
    return ~torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).triu(1)


def padding_mask(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    assert lengths.dim() == 1, "lengths must be a 1-D tensor of sequence lengths"
    return torch.arange(max_len, device=lengths.device) < lengths.view(-1, 1)


def to_additive(mask: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    assert mask.dtype == torch.bool, "to_additive expects a boolean mask (True = may attend)"
    return torch.log(mask.to(dtype))
