# Generated from solutions/masks.py by `grader build`. Your task: replace each
# `raise NotImplementedError(...)` with working code. Keep the names and signatures.
"""Exercise `masks`: build causal and padding masks, and convert a boolean mask to an additive one.

Convention (the one F.scaled_dot_product_attention uses): in a **boolean** mask, True means "this
query may attend to this key" and False means "blocked". nn.MultiheadAttention uses the opposite
convention (True = ignore), so read the docs of whatever you pass a mask to.
An **additive** mask is added to the attention scores before the softmax: 0.0 where attention is
allowed and -inf where it is blocked, so exp(score - inf) = 0 exactly. A finite fill such as -1e9
is not -inf: it leaks a tiny weight and overflows in float16.

- causal_mask(T)[i, j]            = j <= i          (query i sees keys 0..i, never the future)
- padding_mask(lengths, S)[b, j]  = j < lengths[b]  (key j of sequence b is a real token)
- to_additive(mask)               = 0.0 where mask, -inf where not

To combine a (T, T) causal mask with a (B, S) padding mask for SDPA, broadcast the padding mask to
(B, 1, 1, S) (batch, heads, queries, keys) and AND them.
"""

from __future__ import annotations

import torch
from torch import nn


class CausalMask(nn.Module):
    """Builds the (T, T) boolean keep-mask of causal attention: True on and below the diagonal."""

    def forward(self, seq_len: int, device: torch.device | str | None = None) -> torch.Tensor:
        device = torch.device("cpu") if device is None else torch.device(device)
        future = torch.triu(torch.ones(seq_len, seq_len, dtype=torch.bool, device=device), diagonal=1)
        return ~future


class PaddingMask(nn.Module):
    """Builds the (B, max_len) boolean keep-mask of padded sequences: True on real tokens."""

    def forward(self, lengths: torch.Tensor, max_len: int) -> torch.Tensor:
        positions = torch.arange(max_len, device=lengths.device)       # (max_len,)
        return positions.unsqueeze(0) < lengths.unsqueeze(1)            # (B, max_len)


class AdditiveMask(nn.Module):
    """Turns a boolean keep-mask into an additive one: 0.0 where kept, -inf where blocked."""

    def __init__(self, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.dtype: torch.dtype = dtype

    def forward(self, mask: torch.Tensor) -> torch.Tensor:
        zeros = torch.zeros(mask.shape, dtype=self.dtype, device=mask.device)
        return zeros.masked_fill(~mask, float("-inf"))

    def extra_repr(self) -> str:
        return f"dtype={self.dtype}"


def causal_mask(seq_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Boolean (seq_len, seq_len) mask, True on and below the diagonal.

    mask[i, j] is True when query i may attend to key j, i.e. j <= i. dtype must be torch.bool;
    the tensor is created on `device` (default: CPU).
    """
    assert seq_len >= 0, "seq_len must be non-negative"
    return CausalMask()(seq_len, device)


def padding_mask(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    """Boolean (B, max_len) mask, True where a position holds a real token.

    lengths: 1-D int64 tensor of B sequence lengths, each in [0, max_len].
    mask[b, j] is True when j < lengths[b]; a length of 0 gives an all-False row.
    dtype must be torch.bool; the result lives on the device of `lengths`.
    """
    assert lengths.dim() == 1, "lengths must be a 1-D tensor of sequence lengths"
    # lengths: (B,), positions: (max_len,) -> mask: (B, max_len)
    return PaddingMask()(lengths, max_len)


def to_additive(mask: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Turn a boolean keep-mask into an additive one of the same shape.

    Returns a tensor of `dtype` holding 0.0 where `mask` is True and exactly -inf where it is
    False (not -1e9: that is a finite number), ready to be added to attention scores.
    """
    assert mask.dtype == torch.bool, "to_additive expects a boolean mask (True = may attend)"
    return AdditiveMask(dtype)(mask)
