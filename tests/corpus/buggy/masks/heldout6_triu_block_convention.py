"""Bug: causal_mask returns True above the diagonal (True = blocked, the book's convention) instead of True = may attend, so it allows exactly the future keys.

Misconception: mask-inverted
Held out: yes
Source: 003_eef2211e07fb1ee1.txt: mask = torch.triu(torch.ones(...), diagonal=1) with 1 meaning 'mask'; written from scratch
"""

from __future__ import annotations

import torch


def causal_mask(seq_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Boolean (seq_len, seq_len) mask, True on and below the diagonal.

    mask[i, j] is True when query i may attend to key j, i.e. j <= i. dtype must be torch.bool;
    the tensor is created on `device` (default: CPU).
    """
    assert seq_len >= 0, "seq_len must be non-negative"
    mask = torch.triu(torch.ones((seq_len, seq_len), device=device), diagonal=1).bool()
    return mask


def padding_mask(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    """Boolean (B, max_len) mask, True where a position holds a real token.

    lengths: 1-D int64 tensor of B sequence lengths, each in [0, max_len].
    mask[b, j] is True when j < lengths[b]; a length of 0 gives an all-False row.
    dtype must be torch.bool; the result lives on the device of `lengths`.
    """
    assert lengths.dim() == 1, "lengths must be a 1-D tensor of sequence lengths"
    # lengths: (B,), positions: (max_len,) -> mask: (B, max_len)
    idx = torch.arange(max_len, device=lengths.device).unsqueeze(0)  # (1, max_len)
    return idx < lengths.unsqueeze(1)


def to_additive(mask: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Turn a boolean keep-mask into an additive one of the same shape.

    Returns a tensor of `dtype` holding 0.0 where `mask` is True and exactly -inf where it is
    False (not -1e9: that is a finite number), ready to be added to attention scores.
    """
    assert mask.dtype == torch.bool, "to_additive expects a boolean mask (True = may attend)"
    out = torch.zeros_like(mask, dtype=dtype)
    out[~mask] = float("-inf")
    return out
