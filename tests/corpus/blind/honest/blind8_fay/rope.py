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
    if int(head_dim) != head_dim or head_dim < 2 or head_dim % 2:
        raise ValueError(f"head_dim must be an even integer >= 2, got {head_dim}")
    if int(max_len) != max_len or max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    inv_freq = float(base) ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.outer(torch.arange(max_len, dtype=torch.float64), inv_freq)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def _cos_sin_at(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                positions: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows of the tables for x's tokens, ready to broadcast against x's pairs (..., T, head_dim // 2),
    in the dtype the rotation is computed in (at least float32)."""
    # positions None: rows 0 .. T-1 -> (T, hd/2); (T,) -> (T, hd/2); (B, T) -> (B, T, hd/2) -> (B, 1, T, hd/2)
    T = x.shape[-2]
    work = torch.promote_types(torch.promote_types(x.dtype, cos.dtype), torch.float32)
    if positions is None:
        if T > cos.shape[0]:
            raise ValueError(f"sequence of {T} positions but the tables hold only {cos.shape[0]}")
        c, s = cos[:T], sin[:T]
    else:
        positions = torch.as_tensor(positions, device=cos.device)
        if positions.is_floating_point() or positions.is_complex():
            raise ValueError("positions must be an integer tensor")
        if positions.dim() not in (1, 2) or positions.shape[-1] != T:
            raise ValueError(f"positions of shape {tuple(positions.shape)} do not match {T} tokens")
        if positions.numel() and (int(positions.min()) < 0 or int(positions.max()) >= cos.shape[0]):
            raise ValueError(f"positions must lie in 0 .. {cos.shape[0] - 1}")
        c, s = cos[positions], sin[positions]
        if positions.dim() == 2:  # (B, T, hd/2) -> (B, 1, .., 1, T, hd/2)
            if x.dim() < 3 or positions.shape[0] != x.shape[0]:
                raise ValueError("(B, T) positions need x of shape (B, ..., T, head_dim) with the same B")
            c = c.view(c.shape[0], *([1] * (x.dim() - 3)), *c.shape[1:])
            s = s.view(c.shape)
    return c.to(device=x.device, dtype=work), s.to(device=x.device, dtype=work)


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
    c, s = _check_and_tables(x, cos, sin, positions)
    half = x.shape[-1] // 2
    z = torch.complex(x[..., :half].to(c.dtype), x[..., half:].to(c.dtype)) * torch.complex(c, s)
    return torch.cat((z.real, z.imag), dim=-1).to(x.dtype)


def apply_rope_interleaved(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                           positions: torch.Tensor | None = None) -> torch.Tensor:
    """Rotate x in the interleaved pairing: pair i is (x[..., 2i], x[..., 2i + 1]) (RoFormer, Meta's Llama).

    Same arguments, tables and result shape as `apply_rope`; only which features form a pair differs.
    """
    # x1 = x[..., 0::2], x2 = x[..., 1::2]: (B, H, T, hd/2); stacked on a new last dim (..., hd/2, 2) -> (..., hd)
    c, s = _check_and_tables(x, cos, sin, positions)
    z = torch.view_as_complex(x.to(c.dtype).reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(z * torch.complex(c, s)).flatten(-2).to(x.dtype)


def _check_and_tables(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                      positions: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    if x.dim() < 2 or x.shape[-1] % 2 or x.shape[-1] != 2 * cos.shape[-1] or cos.shape != sin.shape:
        raise ValueError(f"x's head_dim {x.shape[-1] if x.dim() else None} must be even and twice the tables' "
                         f"width {cos.shape[-1]}")
    return _cos_sin_at(x, cos, sin, positions)
