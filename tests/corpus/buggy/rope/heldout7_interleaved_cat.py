"""Bug: apply_rope_interleaved rotates the pairs (x[2i], x[2i+1]) but writes them back as two halves (cat) instead of in place, permuting the features.

Misconception: rope-pairing
Held out: yes
Source: https://github.com/raiyanyahya/how-to-train-your-gpt/issues/6 and PR #7 (rotate_half split-half layout mixed with adjacent-pair frequencies); written from scratch
"""

from __future__ import annotations

import torch


def rope_frequencies(head_dim: int, max_len: int, base: float = 10000.0,
                     dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of m * theta_i, each (max_len, head_dim // 2)."""
    if head_dim < 2 or head_dim % 2:
        raise ValueError(f"head_dim must be even and >= 2, got {head_dim}")
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    theta = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    m = torch.arange(max_len, dtype=torch.float64)
    ang = torch.outer(m, theta)
    return torch.cos(ang).to(dtype), torch.sin(ang).to(dtype)


def _tables(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
            positions: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    half = x.shape[-1] // 2
    if x.shape[-1] % 2 or cos.shape[-1] != half or sin.shape[-1] != half:
        raise ValueError("RoPE needs an even head_dim and tables of head_dim // 2 columns")
    if positions is None:
        T = x.shape[-2]
        if T > cos.shape[0]:
            raise ValueError(f"sequence length {T} exceeds max_len {cos.shape[0]}")
        c, s = cos[:T], sin[:T]
    else:
        c, s = cos[positions], sin[positions]
        if positions.dim() == 2:
            c, s = c[:, None], s[:, None]
    dt = torch.promote_types(x.dtype, torch.float32)
    return c.to(dt), s.to(dt)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
               positions: torch.Tensor | None = None) -> torch.Tensor:
    """Half-split pairing: pair i is (x[i], x[i + head_dim // 2])."""
    c, s = _tables(x, cos, sin, positions)
    x1, x2 = x.to(c.dtype).chunk(2, dim=-1)
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(x.dtype)


def apply_rope_interleaved(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                           positions: torch.Tensor | None = None) -> torch.Tensor:
    """Interleaved pairing: pair i is (x[2i], x[2i + 1])."""
    c, s = _tables(x, cos, sin, positions)
    even, odd = x[..., 0::2].to(c.dtype), x[..., 1::2].to(c.dtype)
    return torch.cat([even * c - odd * s, even * s + odd * c], dim=-1).to(x.dtype)
