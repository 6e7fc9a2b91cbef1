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
        raise ValueError(f"head_dim must be even and >= 2, got {head_dim}")
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    # exponents 2i / head_dim for i = 0 .. head_dim/2 - 1, all in float64
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float64).div_(head_dim)
    inv_freq = torch.pow(torch.tensor(float(base), dtype=torch.float64), exponents.neg_())  # theta_i
    positions = torch.arange(max_len, dtype=torch.float64)
    angles = torch.outer(positions, inv_freq)  # (max_len, head_dim // 2), float64
    cos = torch.cos(angles)
    sin = angles.sin_()  # angles is my own intermediate: reuse its storage for sin
    return cos.to(dtype), sin.to(dtype)


def _cos_sin_at(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                positions: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows of the tables for x's tokens, ready to broadcast against x's pairs (..., T, head_dim // 2),
    in the dtype the rotation is computed in (at least float32)."""
    # positions None: rows 0 .. T-1 -> (T, hd/2); (T,) -> (T, hd/2); (B, T) -> (B, T, hd/2) -> (B, 1, T, hd/2)
    if x.dim() < 2:
        raise ValueError(f"x must have at least 2 dims (..., T, head_dim), got shape {tuple(x.shape)}")
    head_dim, T = x.shape[-1], x.shape[-2]
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim must be even, got {head_dim}")
    if cos.shape != sin.shape or cos.dim() != 2:
        raise ValueError(f"cos and sin must be (max_len, head_dim // 2) tables, got {tuple(cos.shape)} and "
                         f"{tuple(sin.shape)}")
    if 2 * cos.shape[-1] != head_dim:
        raise ValueError(f"x's head_dim {head_dim} is not twice the tables' width {cos.shape[-1]}")
    max_len = cos.shape[0]
    compute = torch.promote_types(x.dtype, torch.float32)  # half inputs are rotated in float32

    if positions is None:
        if T > max_len:
            raise ValueError(f"sequence of {T} tokens is longer than the tables' {max_len} positions")
        c, s = cos[:T], sin[:T]
    else:
        if positions.dtype == torch.bool or positions.is_floating_point() or positions.is_complex():
            raise ValueError(f"positions must be an integer tensor, got {positions.dtype}")
        if positions.dim() not in (1, 2) or positions.shape[-1] != T:
            raise ValueError(f"positions must be (T,) or (B, T) with T = {T}, got shape {tuple(positions.shape)}")
        if positions.numel() > 0 and (int(positions.min()) < 0 or int(positions.max()) >= max_len):
            raise ValueError(f"positions must lie in 0 .. {max_len - 1}")
        idx = positions.to(device=cos.device, dtype=torch.long)
        c, s = cos[idx], sin[idx]  # (T, hd/2) or (B, T, hd/2)
        if positions.dim() == 2:
            if x.dim() < 3 or x.shape[0] != positions.shape[0]:
                raise ValueError(f"positions of shape {tuple(positions.shape)} need x of shape (B, ..., T, head_dim) "
                                 f"with B = {positions.shape[0]}, got {tuple(x.shape)}")
            # (B, T, hd/2) -> (B, 1, .., 1, T, hd/2): one row of positions per sequence, shared by its heads
            c = c.view(c.shape[0], *([1] * (x.dim() - 3)), T, c.shape[-1])
            s = s.view(s.shape[0], *([1] * (x.dim() - 3)), T, s.shape[-1])
    return c.to(device=x.device, dtype=compute), s.to(device=x.device, dtype=compute)


def _rotate_into(out: torch.Tensor, first: tuple, second: tuple, x1: torch.Tensor, x2: torch.Tensor,
                 c: torch.Tensor, s: torch.Tensor) -> None:
    """Fill my preallocated `out` in place: out[first] = x1 cos - x2 sin, out[second] = x1 sin + x2 cos (x1 and x2
    are only read). Each view is taken right before it is written, so autograd follows the writes when x needs
    gradients."""
    out1 = out[first]
    out1.copy_(x1)
    out1.mul_(c).addcmul_(x2, s, value=-1.0)
    out2 = out[second]
    out2.copy_(x1)
    out2.mul_(s).addcmul_(x2, c)


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
    out_shape = torch.broadcast_shapes(x.shape[:-1], c.shape[:-1]) + (x.shape[-1],)
    out = torch.empty(out_shape, dtype=c.dtype, device=x.device)
    _rotate_into(out, (..., slice(None, half)), (..., slice(half, None)), x[..., :half], x[..., half:], c, s)
    return out.to(x.dtype)


def apply_rope_interleaved(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                           positions: torch.Tensor | None = None) -> torch.Tensor:
    """Rotate x in the interleaved pairing: pair i is (x[..., 2i], x[..., 2i + 1]) (RoFormer, Meta's Llama).

    Same arguments, tables and result shape as `apply_rope`; only which features form a pair differs.
    """
    # x1 = x[..., 0::2], x2 = x[..., 1::2]: (B, H, T, hd/2); stacked on a new last dim (..., hd/2, 2) -> (..., hd)
    c, s = _cos_sin_at(x, cos, sin, positions)
    out_shape = torch.broadcast_shapes(x.shape[:-1], c.shape[:-1]) + (x.shape[-1],)
    out = torch.empty(out_shape, dtype=c.dtype, device=x.device)
    # the even and odd features of out are strided views: each pair is rotated and stays in place
    _rotate_into(out, (..., slice(0, None, 2)), (..., slice(1, None, 2)), x[..., 0::2], x[..., 1::2], c, s)
    return out.to(x.dtype)
