"""Bug: apply_rope's rotate_half returns (x2, -x1) instead of (-x2, x1), rotating every pair by -m*theta instead of +m*theta.

Misconception: rope-rotation-sign
Held out: yes
Source: https://github.com/naver/croco/issues/3 (rotate_half written as cat((-x2, x1)) vs the variant; sign convention of the rotation); written from scratch
"""

from __future__ import annotations

import torch


def rope_frequencies(head_dim: int, max_len: int, base: float = 10000.0,
                     dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of m * theta_i, each (max_len, head_dim // 2)."""
    if head_dim < 2 or head_dim % 2 != 0:
        raise ValueError(f"head_dim must be even and >= 2, got {head_dim}")
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = torch.pow(torch.tensor(base, dtype=torch.float64), -2.0 * i / head_dim)
    angles = torch.arange(max_len, dtype=torch.float64).unsqueeze(1) * inv_freq.unsqueeze(0)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def _rows(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
          positions: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    pairs = x.shape[-1] // 2
    if x.shape[-1] % 2 != 0 or cos.shape[-1] != pairs or sin.shape[-1] != pairs:
        raise ValueError("RoPE needs an even head_dim and tables of head_dim // 2 columns")
    if positions is None:
        if x.shape[-2] > cos.shape[0]:
            raise ValueError("sequence longer than the tables")
        c, s = cos[: x.shape[-2]], sin[: x.shape[-2]]
    else:
        c, s = cos[positions], sin[positions]
        if positions.dim() == 2:
            c, s = c.unsqueeze(1), s.unsqueeze(1)
    work = torch.promote_types(x.dtype, torch.float32)
    return c.to(work), s.to(work)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x2, -x1), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
               positions: torch.Tensor | None = None) -> torch.Tensor:
    """Half-split pairing, written as x * cos + rotate_half(x) * sin."""
    c, s = _rows(x, cos, sin, positions)
    c2, s2 = torch.cat((c, c), dim=-1), torch.cat((s, s), dim=-1)
    xw = x.to(c.dtype)
    return (xw * c2 + _rotate_half(xw) * s2).to(x.dtype)


def apply_rope_interleaved(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                           positions: torch.Tensor | None = None) -> torch.Tensor:
    """Interleaved pairing: pair i is (x[2i], x[2i + 1])."""
    c, s = _rows(x, cos, sin, positions)
    a, b = x[..., 0::2].to(c.dtype), x[..., 1::2].to(c.dtype)
    return torch.stack((a * c - b * s, a * s + b * c), dim=-1).flatten(-2).to(x.dtype)
