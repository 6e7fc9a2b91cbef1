"""Bug: rope_frequencies computes the inverse frequencies and the angles m * theta_i in the requested `dtype` instead of float64, so float16 tables are wildly wrong at large positions and float32 tables drift by ~1e-4 in the thousands.

Misconception: precision-lowered
Held out: yes
Source: https://github.com/EleutherAI/gpt-neox/issues/1003 (RotaryEmbedding cos/sin computed in fp16/bf16 are wrong for some position/feature pairs); from the reference
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
    if head_dim < 2 or head_dim % 2 != 0:
        raise ValueError(f"RoPE rotates pairs of features: head_dim must be even and >= 2, got {head_dim}")
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    exponents = torch.arange(0, head_dim, 2, dtype=dtype) / head_dim  # 2i / head_dim
    inv_freq = base ** -exponents  # (head_dim // 2,): theta_i
    angles = torch.arange(max_len, dtype=dtype)[:, None] * inv_freq[None, :]  # (max_len, head_dim // 2)
    return angles.cos(), angles.sin()


def _cos_sin_at(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                positions: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows of the tables for x's tokens, ready to broadcast against x's pairs (..., T, head_dim // 2),
    in the dtype the rotation is computed in (at least float32)."""
    # positions None: rows 0 .. T-1 -> (T, hd/2); (T,) -> (T, hd/2); (B, T) -> (B, T, hd/2) -> (B, 1, T, hd/2)
    T, pairs = x.shape[-2], x.shape[-1] // 2
    if x.shape[-1] % 2 != 0 or cos.shape[-1] != pairs or sin.shape[-1] != pairs:
        raise ValueError(f"x has {x.shape[-1]} features: RoPE needs an even head_dim and tables of "
                         f"head_dim // 2 = {pairs} columns, got tables of {cos.shape[-1]}")
    if positions is None:
        if T > cos.shape[0]:
            raise ValueError(f"sequence length {T} exceeds the tables' max_len {cos.shape[0]}")
        c, s = cos[:T], sin[:T]  # (T, hd/2)
    else:
        c, s = cos[positions], sin[positions]  # (T, hd/2) or (B, T, hd/2)
        if positions.dim() == 2:
            c, s = c.unsqueeze(-3), s.unsqueeze(-3)  # (B, 1, T, hd/2): the same positions in every head
    work = torch.promote_types(x.dtype, torch.float32)  # half inputs: rotate in float32, round once
    return c.to(work), s.to(work)


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
    c, s = _cos_sin_at(x, cos, sin, positions)
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half].to(c.dtype), x[..., half:].to(c.dtype)
    return torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).to(x.dtype)


def apply_rope_interleaved(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                           positions: torch.Tensor | None = None) -> torch.Tensor:
    """Rotate x in the interleaved pairing: pair i is (x[..., 2i], x[..., 2i + 1]) (RoFormer, Meta's Llama).

    Same arguments, tables and result shape as `apply_rope`; only which features form a pair differs.
    """
    # x1 = x[..., 0::2], x2 = x[..., 1::2]: (B, H, T, hd/2); stacked on a new last dim (..., hd/2, 2) -> (..., hd)
    c, s = _cos_sin_at(x, cos, sin, positions)
    x1, x2 = x[..., 0::2].to(c.dtype), x[..., 1::2].to(c.dtype)
    rotated = torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1)  # (..., hd/2, 2): each pair stays in place
    return rotated.flatten(-2).to(x.dtype)
