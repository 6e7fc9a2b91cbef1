"""Bug: apply_rope's rotate-half puts the minus sign on the wrong half, so it rotates by -m*theta (the transpose).

Misconception: rope-rotation-sign
Held out: yes
Source: pitfall: sign of rotate_half; written from scratch
"""

from __future__ import annotations

import torch


def rope_frequencies(head_dim: int, max_len: int, base: float = 10000.0,
                     dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin tables of the rotation angles.

    Args:
        head_dim: features per head; must be even and >= 2 (raise ValueError otherwise).
        max_len: number of positions 0 .. max_len - 1 in the tables; must be >= 1 (raise ValueError otherwise).
        base: the RoPE base (10000 in the paper and Llama 2, 500000 in Llama 3); theta_i = base ** (-2 i / head_dim).
        dtype: dtype of the returned tables.

    Returns:
        (cos, sin), each (max_len, head_dim // 2) of `dtype`: cos[m, i] = cos(m * theta_i).
        Compute the angles in float64 and cast at the end: in float32, m * theta_i loses about m * 6e-8 radians,
        visible at positions in the thousands.
    """
    # inv_freq: (head_dim // 2,); angles: (max_len, 1) * (1, head_dim // 2) -> (max_len, head_dim // 2), the rows
    # apply_rope later broadcasts against x's pairs (B, H, T, head_dim // 2)
    if head_dim % 2 != 0 or head_dim < 2:
        raise ValueError("head_dim must be even")
    if max_len < 1:
        raise ValueError("max_len must be >= 1")
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    t = torch.arange(max_len, dtype=torch.float64)
    freqs = torch.outer(t, inv_freq)
    return freqs.cos().to(dtype), freqs.sin().to(dtype)


def _cos_sin_at(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                positions: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows of the tables for x's tokens, ready to broadcast against x's pairs (..., T, head_dim // 2),
    in the dtype the rotation is computed in (at least float32)."""
    # positions None: rows 0 .. T-1 -> (T, hd/2); (T,) -> (T, hd/2); (B, T) -> (B, T, hd/2) -> (B, 1, T, hd/2)
    T = x.shape[-2]
    half = x.shape[-1] // 2
    if x.shape[-1] % 2 != 0 or cos.shape[-1] != half:
        raise ValueError("head_dim must be even and twice the tables' width")
    if positions is None:
        if T > cos.shape[0]:
            raise ValueError("sequence longer than max_len")
        cos_t = cos[:T]
        sin_t = sin[:T]
    else:
        cos_t = cos[positions]
        sin_t = sin[positions]
        if positions.dim() == 2:
            cos_t = cos_t[:, None, :, :]
            sin_t = sin_t[:, None, :, :]
    dt = torch.promote_types(x.dtype, torch.float32)
    return cos_t.to(dt), sin_t.to(dt)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
               positions: torch.Tensor | None = None) -> torch.Tensor:
    """Rotate x in the half-split pairing: pair i is (x[..., i], x[..., i + head_dim // 2]).

    Args:
        x: (B, H, T, head_dim) queries or keys; head_dim must be even and twice the tables' width (raise ValueError
            otherwise).
        cos, sin: tables from `rope_frequencies`, each (max_len, head_dim // 2).
        positions: None for positions 0 .. T-1 (T <= max_len, else ValueError); a (T,) integer tensor of
            absolute positions (e.g. P .. P + T - 1 when decoding after P cached tokens); or (B, T), one row per
            sequence.

    Returns:
        (B, H, T, head_dim), x's dtype (half inputs are rotated in float32 and rounded once). x is not modified.
    """
    # c, s: (T, hd/2) or (B, 1, T, hd/2); x1, x2: (B, H, T, hd/2) -> out (B, H, T, hd)
    cos_t, sin_t = _cos_sin_at(x, cos, sin, positions)
    half = x.shape[-1] // 2
    xf = x.to(cos_t.dtype)
    x1 = xf[..., :half]
    x2 = xf[..., half:]
    rotated = torch.cat([x2, -x1], dim=-1)
    cos_full = torch.cat([cos_t, cos_t], dim=-1)
    sin_full = torch.cat([sin_t, sin_t], dim=-1)
    return (xf * cos_full + rotated * sin_full).to(x.dtype)


def apply_rope_interleaved(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                           positions: torch.Tensor | None = None) -> torch.Tensor:
    """Rotate x in the interleaved pairing: pair i is (x[..., 2i], x[..., 2i + 1]) (RoFormer, Meta's Llama).

    Same arguments, tables and result shape as `apply_rope`; only which features form a pair differs.
    """
    # x1 = x[..., 0::2], x2 = x[..., 1::2]: (B, H, T, hd/2); stacked on a new last dim (..., hd/2, 2) -> (..., hd)
    cos_t, sin_t = _cos_sin_at(x, cos, sin, positions)
    xf = x.to(cos_t.dtype)
    x_even = xf[..., 0::2]
    x_odd = xf[..., 1::2]
    out = torch.empty_like(xf)
    out[..., 0::2] = x_even * cos_t - x_odd * sin_t
    out[..., 1::2] = x_even * sin_t + x_odd * cos_t
    return out.to(x.dtype)
