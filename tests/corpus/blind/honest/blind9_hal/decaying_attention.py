# Generated from solutions/decaying_attention.py by `grader build`. Your task: replace each
# `raise NotImplementedError(...)` with working code. Keep the names and signatures.
"""Exercise `decaying_attention`: multi-head attention whose scores decay with distance, and ALiBi slopes.

`DecayingAttention` (from the course notebook) penalises attention between far-apart tokens. For head h,
query position i and key position j:

    scores[h, i, j] = q_i . k_j / sqrt(head_dim) - gamma[h] * |i - j|

The penalty is added AFTER scaling, it is negative (far tokens get less weight), it uses the absolute
distance (both directions decay; there is no causal mask), and each head has its own learnable
`gamma[h]` (a parameter of shape (num_heads, 1, 1), initialised to 1). This is ALiBi (Press et al.,
"Train Short, Test Long", arXiv 2108.12409) with learned slopes.

ALiBi fixes the slopes instead: `alibi_slopes(n)` returns the standard per-head slopes m_h.
Do not call F.scaled_dot_product_attention or nn.MultiheadAttention here: they are banned in this exercise.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .softmax import softmax_stable


def _check_positive_int(value: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")
    return int(value)


class DecayingAttention(nn.Module):
    """Multi-head self-attention with a learnable per-head distance penalty (no mask, no out_proj).

    Attributes (the names are part of the contract: tests load weights by name):
        qkv:   nn.Linear(embed_dim, 3 * embed_dim) (with bias): one projection for q, k and v
        gamma: nn.Parameter of shape (num_heads, 1, 1), initialised to ones: the decay of each head
    """

    def __init__(self, embed_dim: int, num_heads: int) -> None:
        super().__init__()
        embed_dim = _check_positive_int(embed_dim, "embed_dim")
        num_heads = _check_positive_int(num_heads, "num_heads")
        assert embed_dim % num_heads == 0, "embed_dim must be divisible by num_heads"
        if embed_dim % num_heads != 0:
            raise ValueError(f"embed_dim={embed_dim} must be divisible by num_heads={num_heads}")
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        # one projection for queries, keys and values, laid out as [q | k | v]
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        # the learnable decay of each head, broadcast over (query, key)
        self.gamma = nn.Parameter(torch.ones(num_heads, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Attend with scores q.k/sqrt(head_dim) - gamma[h] * |i - j|.

        Args:
            x: (B, L, embed_dim); any L >= 1.

        Returns:
            (B, L, embed_dim): the heads' context vectors concatenated (head 0 first). The qkv output
            is laid out as [q | k | v], each split into heads: reshape it to (B, L, 3, H, head_dim).
        """
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
        if x.dim() != 3:
            raise ValueError(f"x must have shape (B, L, embed_dim), got {tuple(x.shape)}")
        if not torch.is_floating_point(x):
            raise TypeError(f"x must be a floating point tensor, got dtype {x.dtype}")
        batch_size, seq_len, features = x.shape
        if features != self.embed_dim:
            raise ValueError(f"x has {features} features, expected embed_dim={self.embed_dim}")
        if seq_len < 1:
            raise ValueError("x must hold at least one token (L >= 1)")
        H, hd = self.num_heads, self.head_dim

        # qkv(x): (B, L, 3 * embed_dim) -> (B, L, 3, H, hd) -> (3, B, H, L, hd); q, k, v: each (B, H, L, hd)
        projected = self.qkv(x).reshape(batch_size, seq_len, 3, H, hd)
        stacked = projected.permute(2, 0, 3, 1, 4)
        queries, keys, values = stacked[0], stacked[1], stacked[2]

        # scores, weights: (B, H, L, L); gamma: (H, 1, 1); |i - j|: (L, L); context: (B, H, L, hd) -> (B, L, embed_dim)
        scaled_scores = (queries @ keys.transpose(-2, -1)) / math.sqrt(hd)
        positions = torch.arange(seq_len, device=x.device)
        distance = (positions[:, None] - positions[None, :]).abs().to(scaled_scores.dtype)  # (L, L)
        decay_bias = -self.gamma.to(scaled_scores.dtype) * distance                          # (H, L, L)
        biased_scores = scaled_scores + decay_bias                                           # penalty after scaling
        attn_weights = softmax_stable(biased_scores, dim=-1)
        per_head_context = attn_weights @ values                                             # (B, H, L, hd)
        merged = per_head_context.transpose(1, 2).reshape(batch_size, seq_len, self.embed_dim)
        return merged


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """The ALiBi slope m_h of each head, as a float32 tensor of shape (num_heads,).

    - num_heads a power of two (n): m_h = 2 ** (-8 * h / n) for h = 1, ..., n
      (n = 8: 1/2, 1/4, ..., 1/256).
    - otherwise: with c the largest power of two below num_heads, take the c slopes of alibi_slopes(c)
      followed by every other slope of alibi_slopes(2 * c) (indices 0, 2, 4, ...), keeping the first
      num_heads - c of those (n = 12: 1/2, ..., 1/256, then 0.7071, 0.3536, 0.1768, 0.0884).
    """
    assert num_heads >= 1, "num_heads must be positive"
    num_heads = _check_positive_int(num_heads, "num_heads")

    def power_of_two_slopes(n: int) -> list[float]:
        # m_h = 2 ** (-8 h / n), h = 1..n: a geometric sequence starting (and stepping) at 2 ** (-8 / n)
        return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]

    if num_heads & (num_heads - 1) == 0:  # a power of two (1, 2, 4, 8, ...)
        slopes = power_of_two_slopes(num_heads)
    else:
        closest = 1 << (num_heads.bit_length() - 1)  # the largest power of two below num_heads
        extra = power_of_two_slopes(2 * closest)[0::2][: num_heads - closest]
        slopes = power_of_two_slopes(closest) + extra
    if len(slopes) != num_heads:
        raise RuntimeError(f"internal error: built {len(slopes)} slopes for {num_heads} heads")
    return torch.tensor(slopes, dtype=torch.float32)
