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


def _check_non_negative_int(value: int, name: str) -> int:
    """An int (not a bool) that is >= 0, returned as a plain int."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must be non-negative, got {value}")
    return int(value)


def causal_mask(seq_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Boolean (seq_len, seq_len) mask, True on and below the diagonal.

    mask[i, j] is True when query i may attend to key j, i.e. j <= i. dtype must be torch.bool;
    the tensor is created on `device` (default: CPU).
    """
    assert seq_len >= 0, "seq_len must be non-negative"
    seq_len = _check_non_negative_int(seq_len, "seq_len")
    target_device = torch.device("cpu") if device is None else torch.device(device)
    # query index i down the rows, key index j across the columns: allowed where j <= i
    query_positions = torch.arange(seq_len, device=target_device).unsqueeze(1)  # (T, 1)
    key_positions = torch.arange(seq_len, device=target_device).unsqueeze(0)    # (1, T)
    allowed = key_positions <= query_positions                                  # (T, T) bool
    return allowed


def padding_mask(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    """Boolean (B, max_len) mask, True where a position holds a real token.

    lengths: 1-D int64 tensor of B sequence lengths, each in [0, max_len].
    mask[b, j] is True when j < lengths[b]; a length of 0 gives an all-False row.
    dtype must be torch.bool; the result lives on the device of `lengths`.
    """
    if not isinstance(lengths, torch.Tensor):
        raise TypeError(f"lengths must be a torch.Tensor, got {type(lengths).__name__}")
    assert lengths.dim() == 1, "lengths must be a 1-D tensor of sequence lengths"
    if lengths.dim() != 1:
        raise ValueError(f"lengths must be 1-D, got shape {tuple(lengths.shape)}")
    if lengths.dtype == torch.bool or lengths.is_floating_point() or lengths.is_complex():
        raise TypeError(f"lengths must hold integers (int64), got dtype {lengths.dtype}")
    max_len = _check_non_negative_int(max_len, "max_len")
    if lengths.numel() > 0:
        if bool(torch.any(lengths < 0).item()):
            raise ValueError(f"every length must be >= 0, got min {int(lengths.min().item())}")
        if bool(torch.any(lengths > max_len).item()):
            raise ValueError(f"every length must be <= max_len={max_len}, got max {int(lengths.max().item())}")
    # lengths: (B,), positions: (max_len,) -> mask: (B, max_len)
    positions = torch.arange(max_len, device=lengths.device)         # (S,)
    real_token = positions.unsqueeze(0) < lengths.unsqueeze(1)       # (B, S) bool
    return real_token


def to_additive(mask: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Turn a boolean keep-mask into an additive one of the same shape.

    Returns a tensor of `dtype` holding 0.0 where `mask` is True and exactly -inf where it is
    False (not -1e9: that is a finite number), ready to be added to attention scores.
    """
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"mask must be a torch.Tensor, got {type(mask).__name__}")
    assert mask.dtype == torch.bool, "to_additive expects a boolean mask (True = may attend)"
    if mask.dtype != torch.bool:
        raise TypeError(f"to_additive expects a boolean mask, got dtype {mask.dtype}")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating point torch.dtype (it has to hold -inf), got {dtype}")
    # a fresh tensor: the caller's mask is never modified
    zeros = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    additive = zeros.masked_fill(~mask, float("-inf"))
    return additive
