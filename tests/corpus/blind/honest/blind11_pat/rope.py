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
        raise ValueError(f"head_dim must be even and >= 2 (RoPE rotates pairs of features), got {head_dim}")
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    n = head_dim // 2
    # theta_i = base^(-2i / d), i = 0 .. d/2 - 1, all in float64
    i = torch.arange(n, dtype=torch.float64)                                  # (n,)
    theta = torch.pow(torch.tensor(float(base), dtype=torch.float64), -2.0 * i / head_dim)  # (n,)
    m = torch.arange(max_len, dtype=torch.float64)                            # (max_len,)
    # phi[m, i] = m * theta_i: the outer product of positions and frequencies
    phi = torch.einsum("m,i->mi", m, theta)                                   # (max_len, n)
    assert phi.shape == (max_len, n) and phi.dtype == torch.float64
    assert bool(torch.isfinite(phi).all()), "rotation angles must be finite"
    cos, sin = torch.cos(phi).to(dtype), torch.sin(phi).to(dtype)             # (max_len, n) each
    assert cos.shape == sin.shape == (max_len, n) and cos.dtype == sin.dtype == dtype
    return cos, sin


def _cos_sin_at(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                positions: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows of the tables for x's tokens, ready to broadcast against x's pairs (..., T, head_dim // 2),
    in the dtype the rotation is computed in (at least float32)."""
    # positions None: rows 0 .. T-1 -> (T, hd/2); (T,) -> (T, hd/2); (B, T) -> (B, T, hd/2) -> (B, 1, T, hd/2)
    T, max_len = x.shape[-2], cos.shape[0]
    assert cos.shape == sin.shape, "cos and sin tables must have the same shape"
    work = torch.promote_types(x.dtype, torch.float32)                        # at least float32
    if positions is None:
        if T > max_len:
            raise ValueError(f"sequence of {T} positions but the RoPE tables hold only {max_len}")
        c, s = cos[:T], sin[:T]                                               # (T, hd/2)
    else:
        if positions.dtype.is_floating_point or positions.dtype.is_complex or positions.dtype == torch.bool:
            raise ValueError(f"positions must be an integer tensor, got {positions.dtype}")
        if positions.dim() not in (1, 2) or positions.shape[-1] != T:
            raise ValueError(f"positions must be (T,) or (B, T) with T = {T}, got {tuple(positions.shape)}")
        if positions.numel() > 0 and (int(positions.min()) < 0 or int(positions.max()) >= max_len):
            raise ValueError(f"positions must lie in 0 .. {max_len - 1}, the rows of the tables")
        idx = positions.to(device=cos.device, dtype=torch.long)
        c, s = cos[idx], sin[idx]                                             # (T, hd/2) or (B, T, hd/2)
        if positions.dim() == 2:
            if x.dim() != 4 or x.shape[0] != positions.shape[0]:
                raise ValueError("positions of shape (B, T) need x of shape (B, H, T, head_dim) with the same B")
            c, s = c[:, None], s[:, None]                                     # (B, 1, T, hd/2)
    c, s = c.to(device=x.device, dtype=work), s.to(device=x.device, dtype=work)
    assert c.shape == s.shape and c.shape[-2:] == (T, cos.shape[-1])
    return c, s


def _rotation(c: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """The 2x2 rotation matrices R(phi) = [[cos phi, -sin phi], [sin phi, cos phi]], one per (position, pair):
    (..., T, n) -> (..., T, n, 2, 2), R[..., a, b] the entry in row a and column b."""
    R = torch.stack((torch.stack((c, -s), dim=-1),                            # row 0: (cos, -sin)
                     torch.stack((s, c), dim=-1)), dim=-2)                    # row 1: (sin,  cos)
    assert R.shape == (*c.shape, 2, 2)
    return R


def _pairs_per_head(x: torch.Tensor, cos: torch.Tensor) -> int:
    """n = head_dim / 2, the number of rotated pairs; ValueError when head_dim is odd or does not fit the tables."""
    hd = x.shape[-1]
    if hd % 2 != 0:
        raise ValueError(f"head_dim must be even (RoPE rotates pairs of features), got {hd}")
    if hd != 2 * cos.shape[-1]:
        raise ValueError(f"head_dim {hd} must be twice the width {cos.shape[-1]} of the tables")
    return hd // 2


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
    n = _pairs_per_head(x, cos)
    c, s = _cos_sin_at(x, cos, sin, positions)
    z = x.to(c.dtype)                                                         # a new tensor or x itself, never written
    # pair i = (x_i, x_{i+n}):  p[..., t, i, :] = (x1_i, x2_i)
    p = torch.stack((z[..., :n], z[..., n:]), dim=-1)                         # (B, H, T, n, 2)
    # (R p)_a = sum_b R_ab p_b:  (x1 cos - x2 sin, x1 sin + x2 cos)
    r = torch.einsum("...tiab,...tib->...tia", _rotation(c, s), p)           # (B, H, T, n, 2)
    out = torch.cat((r[..., 0], r[..., 1]), dim=-1).to(x.dtype)               # (B, H, T, 2n): cat(first, second)
    assert out.shape == x.shape and out.dtype == x.dtype
    return out


def apply_rope_interleaved(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                           positions: torch.Tensor | None = None) -> torch.Tensor:
    """Rotate x in the interleaved pairing: pair i is (x[..., 2i], x[..., 2i + 1]) (RoFormer, Meta's Llama).

    Same arguments, tables and result shape as `apply_rope`; only which features form a pair differs.
    """
    # x1 = x[..., 0::2], x2 = x[..., 1::2]: (B, H, T, hd/2); stacked on a new last dim (..., hd/2, 2) -> (..., hd)
    n = _pairs_per_head(x, cos)
    c, s = _cos_sin_at(x, cos, sin, positions)
    z = x.to(c.dtype)
    # pair i = (x_{2i}, x_{2i+1}):  p[..., t, i, :] = (x[2i], x[2i+1])
    p = torch.stack((z[..., 0::2], z[..., 1::2]), dim=-1)                     # (B, H, T, n, 2)
    # out[2i] = x[2i] cos - x[2i+1] sin, out[2i+1] = x[2i] sin + x[2i+1] cos: each pair stays in place
    r = torch.einsum("...tiab,...tib->...tia", _rotation(c, s), p)           # (B, H, T, n, 2)
    out = r.flatten(-2).to(x.dtype)                                           # (B, H, T, 2n), interleaved again
    assert out.shape == x.shape and out.dtype == x.dtype and out.shape[-1] == 2 * n
    return out
