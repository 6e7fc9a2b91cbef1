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
    # validate the arguments first
    if not isinstance(head_dim, int) or head_dim < 2 or head_dim % 2 != 0:
        raise ValueError(f"head_dim must be an even integer >= 2, got {head_dim!r}")
    if not isinstance(max_len, int) or max_len < 1:
        raise ValueError(f"max_len must be an integer >= 1, got {max_len!r}")

    num_pairs = head_dim // 2

    # theta_i = base ** (-2 i / head_dim), computed in float64
    pair_index = torch.arange(num_pairs, dtype=torch.float64)
    exponent = -2.0 * pair_index / head_dim
    theta = torch.pow(torch.tensor(float(base), dtype=torch.float64), exponent)   # (num_pairs,)

    # angle[m, i] = m * theta_i, also in float64 (float32 would lose precision at large m)
    position = torch.arange(max_len, dtype=torch.float64)                        # (max_len,)
    angles = position[:, None] * theta[None, :]                                  # (max_len, num_pairs)
    assert angles.shape == (max_len, num_pairs)

    # cast only at the very end
    cos = torch.cos(angles).to(dtype)
    sin = torch.sin(angles).to(dtype)
    return cos, sin


def _cos_sin_at(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                positions: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows of the tables for x's tokens, ready to broadcast against x's pairs (..., T, head_dim // 2),
    in the dtype the rotation is computed in (at least float32)."""
    # positions None: rows 0 .. T-1 -> (T, hd/2); (T,) -> (T, hd/2); (B, T) -> (B, T, hd/2) -> (B, 1, T, hd/2)
    num_tokens = x.shape[-2]
    max_len = cos.shape[0]

    # the rotation is computed in float32 at least (half inputs), or in float64 for float64 inputs
    compute_dtype = torch.promote_types(x.dtype, torch.float32)

    if positions is None:
        # positions 0 .. T-1
        if num_tokens > max_len:
            raise ValueError(f"{num_tokens} tokens but the RoPE tables only cover {max_len} positions")
        cos_rows = cos[:num_tokens]                                   # (T, hd/2)
        sin_rows = sin[:num_tokens]
    else:
        if not isinstance(positions, torch.Tensor):
            positions = torch.tensor(positions)
        if positions.dtype.is_floating_point or positions.dtype.is_complex or positions.dtype == torch.bool:
            raise ValueError(f"positions must be an integer tensor, got dtype {positions.dtype}")
        positions = positions.to(device=cos.device, dtype=torch.long)
        if positions.numel() > 0:
            smallest = int(positions.min())
            largest = int(positions.max())
            if smallest < 0 or largest >= max_len:
                raise ValueError(f"positions must be in 0 .. {max_len - 1}, got {smallest} .. {largest}")

        if positions.dim() == 1:
            # one absolute position per token, shared by every sequence
            if positions.shape[0] != num_tokens:
                raise ValueError(f"positions has {positions.shape[0]} entries, x has {num_tokens} tokens")
            cos_rows = cos[positions]                                 # (T, hd/2)
            sin_rows = sin[positions]
        elif positions.dim() == 2:
            # one row of positions per sequence: (B, T)
            batch = positions.shape[0]
            if x.dim() < 3 or x.shape[0] != batch or positions.shape[1] != num_tokens:
                raise ValueError(f"positions of shape {tuple(positions.shape)} do not fit x of shape {tuple(x.shape)}")
            cos_rows = cos[positions]                                 # (B, T, hd/2)
            sin_rows = sin[positions]
            # put singleton dims between B and T (the head dim for (B, H, T, hd) inputs): (B, 1, T, hd/2)
            middle = [1] * (x.dim() - 3)
            cos_rows = cos_rows.reshape(batch, *middle, num_tokens, cos.shape[1])
            sin_rows = sin_rows.reshape(batch, *middle, num_tokens, sin.shape[1])
        else:
            raise ValueError(f"positions must be None, (T,) or (B, T), got shape {tuple(positions.shape)}")

    cos_rows = cos_rows.to(device=x.device, dtype=compute_dtype)
    sin_rows = sin_rows.to(device=x.device, dtype=compute_dtype)
    return cos_rows, sin_rows


def _check_head_dim(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> None:
    """Raise ValueError unless x's last dim is even and twice the tables' width."""
    if x.dim() < 2:
        raise ValueError(f"x must have at least (T, head_dim) dims, got shape {tuple(x.shape)}")
    head_dim = x.shape[-1]
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim must be even, got {head_dim}")
    if cos.dim() != 2 or cos.shape != sin.shape:
        raise ValueError(f"cos and sin must both be (max_len, head_dim // 2), got {tuple(cos.shape)}, {tuple(sin.shape)}")
    if head_dim != 2 * cos.shape[1]:
        raise ValueError(f"head_dim {head_dim} is not twice the tables' width {cos.shape[1]}")


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
    _check_head_dim(x, cos, sin)
    cos_rows, sin_rows = _cos_sin_at(x, cos, sin, positions)
    half = x.shape[-1] // 2

    # work on a (possibly upcast) copy: never modify x
    x_work = x.to(cos_rows.dtype)
    x1 = x_work[..., :half]       # first member of each pair
    x2 = x_work[..., half:]       # second member of each pair

    rotated_first = x1 * cos_rows - x2 * sin_rows
    rotated_second = x1 * sin_rows + x2 * cos_rows
    out = torch.cat([rotated_first, rotated_second], dim=-1)
    assert out.shape[-1] == x.shape[-1]
    return out.to(x.dtype)


def apply_rope_interleaved(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                           positions: torch.Tensor | None = None) -> torch.Tensor:
    """Rotate x in the interleaved pairing: pair i is (x[..., 2i], x[..., 2i + 1]) (RoFormer, Meta's Llama).

    Same arguments, tables and result shape as `apply_rope`; only which features form a pair differs.
    """
    # x1 = x[..., 0::2], x2 = x[..., 1::2]: (B, H, T, hd/2); stacked on a new last dim (..., hd/2, 2) -> (..., hd)
    _check_head_dim(x, cos, sin)
    cos_rows, sin_rows = _cos_sin_at(x, cos, sin, positions)

    x_work = x.to(cos_rows.dtype)
    x_even = x_work[..., 0::2]    # x[2i]
    x_odd = x_work[..., 1::2]     # x[2i + 1]

    new_even = x_even * cos_rows - x_odd * sin_rows
    new_odd = x_even * sin_rows + x_odd * cos_rows

    # put the pairs back in place: (..., hd/2, 2) -> (..., hd)
    out = torch.stack([new_even, new_odd], dim=-1)
    out = out.reshape(*out.shape[:-2], x.shape[-1])
    return out.to(x.dtype)
