"""Bug: padding_mask compares positions with `<=` instead of `<`, so every sequence gets one extra True (position lengths[b] is treated as a real token, and a length-0 row is not all False).

Misconception: padding-off-by-one
Held out: yes
Source: classic learner slip (off-by-one in the length comparison); from the reference
"""

from __future__ import annotations

import torch


def causal_mask(seq_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Boolean (seq_len, seq_len) mask, True on and below the diagonal.

    mask[i, j] is True when query i may attend to key j, i.e. j <= i. dtype must be torch.bool;
    the tensor is created on `device` (default: CPU).
    """
    assert seq_len >= 0, "seq_len must be non-negative"
    ones = torch.ones(seq_len, seq_len, dtype=torch.bool, device=device)  # (T, T)
    return torch.tril(ones)  # keep j <= i: the diagonal and everything below it


def padding_mask(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    """Boolean (B, max_len) mask, True where a position holds a real token.

    lengths: 1-D int64 tensor of B sequence lengths, each in [0, max_len].
    mask[b, j] is True when j < lengths[b]; a length of 0 gives an all-False row.
    dtype must be torch.bool; the result lives on the device of `lengths`.
    """
    assert lengths.dim() == 1, "lengths must be a 1-D tensor of sequence lengths"
    # lengths: (B,), positions: (max_len,) -> mask: (B, max_len)
    positions = torch.arange(max_len, device=lengths.device)  # (S,)
    return positions[None, :] <= lengths[:, None]  # (1, S) <= (B, 1) -> (B, S)


def to_additive(mask: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Turn a boolean keep-mask into an additive one of the same shape.

    Returns a tensor of `dtype` holding 0.0 where `mask` is True and exactly -inf where it is
    False (not -1e9: that is a finite number), ready to be added to attention scores.
    """
    assert mask.dtype == torch.bool, "to_additive expects a boolean mask (True = may attend)"
    additive = torch.zeros(mask.shape, dtype=dtype, device=mask.device)  # same shape as mask
    return additive.masked_fill(~mask, float("-inf"))  # blocked positions get -inf
