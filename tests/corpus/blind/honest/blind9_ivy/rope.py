# Generated from solutions/rope.py by `grader build`. Your task: replace each
# `raise NotImplementedError(...)` with working code. Keep the names and signatures.
"""Exercise `rope`: rotary position embeddings (RoPE, Su et al. 2021), as Llama and GPT-NeoX use them.

RoPE encodes a token's position m by ROTATING its query and key vectors instead of adding a position vector.
The head_dim features are split into head_dim / 2 pairs; pair i is rotated by the angle m * theta_i, with

    theta_i = base ** (-2 i / head_dim),   i = 0 .. head_dim / 2 - 1       (base = 10000 by default)

so the first pairs turn fast (theta_0 = 1 radian per position) and the last ones slowly. A rotation keeps the
vector's norm, and the dot product of a query rotated to position m with a key rotated to position n depends
only on m - n: attention scores see relative positions.

Two pairings are in use, and they are NOT interchangeable (a model trained with one breaks with the other):
- half-split (`apply_rope`; GPT-NeoX, Hugging Face Llama, LitGPT): pair i is (x[i], x[i + head_dim / 2]).
  With x1 = x[..., :head_dim/2] and x2 = x[..., head_dim/2:] the rotated vector is
      cat(x1 * cos - x2 * sin,  x1 * sin + x2 * cos)
- interleaved (`apply_rope_interleaved`; RoFormer, Meta's original Llama code): pair i is (x[2i], x[2i + 1]);
  each pair is rotated the same way and stays in place: out[2i] = x[2i] cos - x[2i+1] sin,
  out[2i+1] = x[2i] sin + x[2i+1] cos.

Tables: `rope_frequencies` returns cos and sin of the angles m * theta_i, each of shape (max_len, head_dim // 2)
(one column per PAIR, not duplicated to head_dim); both pairings use the same tables.
Inputs x are (B, H, T, head_dim) (any leading dims work when positions is None or (T,)). RoPE rotates queries and
keys only, never values. head_dim must be even: an odd head_dim is refused with a ValueError.
"""

from __future__ import annotations

import operator

import torch


def _is_int(value: object) -> bool:
    """True for Python ints and integer-like scalars (never for bools or floats)."""
    if isinstance(value, bool):
        return False
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


def _compute_dtype(*dtypes: torch.dtype) -> torch.dtype:
    """The dtype a rotation runs in: the widest of the inputs', never below float32."""
    out = torch.float32
    for dt in dtypes:
        out = torch.promote_types(out, dt)
    return out




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
    if not _is_int(head_dim) or head_dim < 2 or head_dim % 2 != 0:
        raise ValueError(f"head_dim must be an even integer >= 2, got {head_dim!r}")
    if not _is_int(max_len) or max_len < 1:
        raise ValueError(f"max_len must be an integer >= 1, got {max_len!r}")
    if not base > 0:
        raise ValueError(f"base must be positive, got {base!r}")

    # Llama-style inverse frequencies, kept in float64 until the very end
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim   # 2i / head_dim
    inv_freq = torch.tensor(float(base), dtype=torch.float64).pow(-exponents)   # (head_dim // 2,)
    t = torch.arange(max_len, dtype=torch.float64)                              # (max_len,)
    freqs = torch.outer(t, inv_freq)                                            # (max_len, head_dim // 2)
    return freqs.cos().to(dtype), freqs.sin().to(dtype)


def _cos_sin_at(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                positions: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows of the tables for x's tokens, ready to broadcast against x's pairs (..., T, head_dim // 2),
    in the dtype the rotation is computed in (at least float32)."""
    if cos.dim() != 2 or sin.shape != cos.shape:
        raise ValueError(f"cos and sin must be two (max_len, head_dim // 2) tables, got {tuple(cos.shape)} and "
                         f"{tuple(sin.shape)}")
    if x.dim() < 2:
        raise ValueError(f"x must be (..., T, head_dim), got shape {tuple(x.shape)}")
    head_dim, seq_len = x.shape[-1], x.shape[-2]
    max_len, half = cos.shape
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim must be even to form pairs, got {head_dim}")
    if head_dim != 2 * half:
        raise ValueError(f"x has head_dim {head_dim} but the tables cover {2 * half} features (width {half})")

    compute = _compute_dtype(x.dtype, cos.dtype)
    if positions is None:
        if seq_len > max_len:
            raise ValueError(f"sequence of {seq_len} tokens is longer than the tables' {max_len} positions")
        c, s = cos[:seq_len], sin[:seq_len]                                      # (T, hd/2)
    else:
        if not isinstance(positions, torch.Tensor):
            positions = torch.as_tensor(positions)
        if positions.is_floating_point() or positions.is_complex() or positions.dtype == torch.bool:
            raise ValueError(f"positions must be an integer tensor, got {positions.dtype}")
        if positions.dim() not in (1, 2) or positions.shape[-1] != seq_len:
            raise ValueError(f"positions must be (T,) or (B, T) with T = {seq_len}, got {tuple(positions.shape)}")
        if positions.dim() == 2 and (x.dim() != 4 or positions.shape[0] != x.shape[0]):
            raise ValueError(f"(B, T) positions need x of shape (B, H, T, head_dim) with the same B, got x "
                             f"{tuple(x.shape)} and positions {tuple(positions.shape)}")
        if positions.numel() > 0:
            lo, hi = int(positions.min().item()), int(positions.max().item())
            if lo < 0 or hi >= max_len:
                raise ValueError(f"positions must lie in [0, {max_len}), got values in [{lo}, {hi}]")
        index = positions.to(device=cos.device, dtype=torch.long)
        c, s = cos[index], sin[index]                                            # (T, hd/2) or (B, T, hd/2)
        if positions.dim() == 2:
            c, s = c.unsqueeze(1), s.unsqueeze(1)                                # (B, 1, T, hd/2): over the heads
    return c.to(device=x.device, dtype=compute), s.to(device=x.device, dtype=compute)


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
    c, s = _cos_sin_at(x, cos, sin, positions)
    x1, x2 = x.to(c.dtype).chunk(2, dim=-1)                                      # (..., T, hd/2) each
    rotated = torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1)
    return rotated.to(x.dtype)


def apply_rope_interleaved(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                           positions: torch.Tensor | None = None) -> torch.Tensor:
    """Rotate x in the interleaved pairing: pair i is (x[..., 2i], x[..., 2i + 1]) (RoFormer, Meta's Llama).

    Same arguments, tables and result shape as `apply_rope`; only which features form a pair differs.
    """
    c, s = _cos_sin_at(x, cos, sin, positions)
    xf = x.to(c.dtype)
    x_even, x_odd = xf[..., 0::2], xf[..., 1::2]                                 # (..., T, hd/2) each
    rotated = torch.stack((x_even * c - x_odd * s, x_even * s + x_odd * c), dim=-1)   # (..., T, hd/2, 2)
    return rotated.flatten(-2).to(x.dtype)
