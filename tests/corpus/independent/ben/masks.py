"""Masks filled row by row (ben)."""

from __future__ import annotations

import torch


def causal_mask(seq_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    assert seq_len >= 0, "seq_len must be non-negative"
    result = torch.zeros(seq_len, seq_len, dtype=torch.bool, device=device)
    for row in range(seq_len):
        result[row, : row + 1] = True
    return result


def padding_mask(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    assert lengths.dim() == 1, "lengths must be a 1-D tensor of sequence lengths"
    result = torch.zeros(len(lengths), max_len, dtype=torch.bool, device=lengths.device)
    for batch_index, length in enumerate(lengths.tolist()):
        result[batch_index, :length] = True
    return result


def to_additive(mask: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    assert mask.dtype == torch.bool, "to_additive expects a boolean mask (True = may attend)"
    result = torch.full(mask.shape, float("-inf"), dtype=dtype, device=mask.device)
    result[mask] = 0.0
    return result
