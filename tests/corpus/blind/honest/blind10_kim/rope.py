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
    # bad arguments first: an int-like head_dim that is even and at least 2, at least one position
    if isinstance(head_dim, bool) or int(head_dim) != head_dim:
        raise ValueError(f"head_dim must be an integer, got {head_dim!r}")
    if isinstance(max_len, bool) or int(max_len) != max_len:
        raise ValueError(f"max_len must be an integer, got {max_len!r}")
    head_dim, max_len = int(head_dim), int(max_len)
    if head_dim < 2 or head_dim % 2 != 0:
        raise ValueError(f"head_dim must be even and >= 2 (RoPE turns pairs of features), got {head_dim}")
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    if not base > 0:
        raise ValueError(f"base must be positive, got {base}")

    n_pairs = head_dim // 2
    # one speed per pair, written out as a plain Python list: theta_i = base ** (-2 i / head_dim)
    speeds = []
    for i in range(n_pairs):
        speeds.append(float(base) ** (-2.0 * i / head_dim))
    theta = torch.tensor(speeds, dtype=torch.float64)                     # (n_pairs,)
    where = torch.arange(max_len, dtype=torch.float64)                    # (max_len,) positions 0 .. max_len - 1
    angles = torch.outer(where, theta)                                    # (max_len, n_pairs), still float64
    cos_table = torch.cos(angles).to(dtype)
    sin_table = torch.sin(angles).to(dtype)
    assert cos_table.shape == (max_len, n_pairs) and sin_table.shape == (max_len, n_pairs)
    return cos_table, sin_table


def _cos_sin_at(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                positions: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows of the tables for x's tokens, ready to broadcast against x's pairs (..., T, head_dim // 2),
    in the dtype the rotation is computed in (at least float32)."""
    if cos.dim() != 2 or sin.shape != cos.shape:
        raise ValueError(f"cos and sin must both be (max_len, head_dim // 2) tables, got {tuple(cos.shape)} and "
                         f"{tuple(sin.shape)}")
    if x.dim() < 2:
        raise ValueError(f"x must have at least (T, head_dim) dims, got shape {tuple(x.shape)}")
    n_rows = int(cos.shape[0])
    T = int(x.shape[-2])

    # the rotation is done in x's dtype, or float32 when x is half; float64 tables are kept in float64
    work = torch.promote_types(torch.promote_types(x.dtype, cos.dtype), torch.float32)
    if not work.is_floating_point:
        work = torch.float32

    if positions is None:
        if T > n_rows:
            raise ValueError(f"sequence of {T} tokens but the tables only hold {n_rows} positions")
        c = cos[:T]
        s = sin[:T]
    else:
        if not isinstance(positions, torch.Tensor):
            positions = torch.tensor(positions)
        if positions.dtype.is_floating_point or positions.dtype.is_complex or positions.dtype == torch.bool:
            raise ValueError(f"positions must be an integer tensor, got dtype {positions.dtype}")
        if positions.dim() not in (1, 2) or int(positions.shape[-1]) != T:
            raise ValueError(f"positions must be (T,) or (B, T) with T = {T}, got shape {tuple(positions.shape)}")
        if positions.dim() == 2 and (x.dim() < 3 or int(positions.shape[0]) != int(x.shape[0])):
            raise ValueError(f"positions of shape {tuple(positions.shape)} need x of shape (B, ..., T, head_dim) with "
                             f"the same B, got {tuple(x.shape)}")
        if positions.numel() > 0:
            lowest = int(positions.min().item())
            highest = int(positions.max().item())
            if lowest < 0 or highest >= n_rows:
                raise ValueError(f"positions must lie in 0 .. {n_rows - 1} (the tables' rows), got {lowest} .. "
                                 f"{highest}")
        rows = positions.to(device=cos.device, dtype=torch.long)
        flat = rows.reshape(-1)
        c = torch.index_select(cos, 0, flat).reshape(*rows.shape, cos.shape[-1])   # (T, hd/2) or (B, T, hd/2)
        s = torch.index_select(sin, 0, flat).reshape(*rows.shape, sin.shape[-1])
        if positions.dim() == 2:
            # (B, T, hd/2) -> (B, 1, ..., 1, T, hd/2): one 1 for every dim of x between the batch and T
            for _ in range(x.dim() - 3):
                c = c.unsqueeze(1)
                s = s.unsqueeze(1)
    return c.to(device=x.device, dtype=work), s.to(device=x.device, dtype=work)


def _check_width(x: torch.Tensor, cos: torch.Tensor) -> int:
    """head_dim of x after checking it is even and twice the tables' width; returns half of it."""
    hd = int(x.shape[-1]) if x.dim() >= 1 else 0
    if hd % 2 != 0 or hd < 2:
        raise ValueError(f"head_dim must be even and >= 2, got {hd}")
    if cos.dim() < 1 or hd != 2 * int(cos.shape[-1]):
        raise ValueError(f"x has head_dim {hd} but the tables have {int(cos.shape[-1]) if cos.dim() else 0} columns; "
                         f"expected head_dim // 2 = {hd // 2}")
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
    half = _check_width(x, cos)
    c, s = _cos_sin_at(x, cos, sin, positions)
    z = x.to(c.dtype)                       # a new tensor when x is half; never written to in place either way
    first = z[..., :half]                   # x1: the first member of every pair
    second = z[..., half:]                  # x2: its partner, half a head further on
    turned_first = first * c - second * s
    turned_second = first * s + second * c
    out = torch.cat([turned_first, turned_second], dim=-1)
    return out.to(x.dtype)


def apply_rope_interleaved(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                           positions: torch.Tensor | None = None) -> torch.Tensor:
    """Rotate x in the interleaved pairing: pair i is (x[..., 2i], x[..., 2i + 1]) (RoFormer, Meta's Llama).

    Same arguments, tables and result shape as `apply_rope`; only which features form a pair differs.
    """
    half = _check_width(x, cos)
    c, s = _cos_sin_at(x, cos, sin, positions)
    z = x.to(c.dtype)
    evens = z[..., 0::2]                    # x[2i]
    odds = z[..., 1::2]                     # x[2i + 1]
    turned_evens = evens * c - odds * s
    turned_odds = evens * s + odds * c
    # put every pair back where it came from: (..., hd/2, 2) -> (..., hd)
    out = torch.stack([turned_evens, turned_odds], dim=-1).flatten(-2)
    assert out.shape[-1] == 2 * half
    return out.to(x.dtype)
