"""Bug: padding_mask uses j <= lengths[b], marking one padding position per sequence as a real token.

Misconception: padding-off-by-one
Held out: yes
Source: https://github.com/ml-explore/mlx-lm/pull/390 (mask had one too many True values); written from scratch
"""

from __future__ import annotations

import torch


def causal_mask(seq_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Boolean (seq_len, seq_len) mask, True where key j <= query i."""
    assert seq_len >= 0, "seq_len must be non-negative"
    i = torch.arange(seq_len, device=device)
    return i[None, :] <= i[:, None]


def padding_mask(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    """Boolean (B, max_len) mask, True for real tokens."""
    assert lengths.dim() == 1, "lengths must be a 1-D tensor of sequence lengths"
    j = torch.arange(max_len, device=lengths.device)
    return j[None, :] <= lengths[:, None]


def to_additive(mask: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """0.0 where mask is True, -inf where it is False."""
    assert mask.dtype == torch.bool, "to_additive expects a boolean mask (True = may attend)"
    zeros = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return zeros.masked_fill(mask.logical_not(), float("-inf"))
