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


class DecayingAttention(nn.Module):
    """Multi-head self-attention with a learnable per-head distance penalty (no mask, no out_proj).

    Attributes (the names are part of the contract: tests load weights by name):
        qkv:   nn.Linear(embed_dim, 3 * embed_dim) (with bias): one projection for q, k and v
        gamma: nn.Parameter of shape (num_heads, 1, 1), initialised to ones: the decay of each head
    """

    def __init__(self, embed_dim: int, num_heads: int) -> None:
        super().__init__()
        assert embed_dim % num_heads == 0, "embed_dim must be divisible by num_heads"
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.gamma = nn.Parameter(torch.ones(num_heads, 1, 1))  # one decay per head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Attend with scores q.k/sqrt(head_dim) - gamma[h] * |i - j|.

        Args:
            x: (B, L, embed_dim); any L >= 1.

        Returns:
            (B, L, embed_dim): the heads' context vectors concatenated (head 0 first). The qkv output
            is laid out as [q | k | v], each split into heads: reshape it to (B, L, 3, H, head_dim).
        """
        # qkv(x): (B, L, 3 * embed_dim) -> (B, L, 3, H, hd) -> (3, B, H, L, hd); q, k, v: each (B, H, L, hd)
        # scores, weights: (B, H, L, L); gamma: (H, 1, 1); |i - j|: (L, L); context: (B, H, L, hd) -> (B, L, embed_dim)
        B, L, C = x.shape
        H, hd = self.num_heads, self.head_dim

        qkv = self.qkv(x).reshape(B, L, 3, H, hd).permute(2, 0, 3, 1, 4)  # (3, B, H, L, hd)
        q, k, v = qkv[0], qkv[1], qkv[2]

        scores = torch.matmul(q, k.transpose(-2, -1)) * hd ** -0.5  # (B, H, L, L)

        # |i - j| by broadcasting a column of positions against a row of positions
        pos = torch.arange(L, device=x.device)
        dist = (pos[:, None] - pos[None, :]).abs().to(scores.dtype)  # (L, L)
        scores = scores - self.gamma * dist  # gamma (H, 1, 1) * dist (L, L) -> (H, L, L)

        weights = torch.softmax(scores, dim=-1)
        out = torch.matmul(weights, v)  # (B, H, L, hd)
        return out.transpose(1, 2).reshape(B, L, C)


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """The ALiBi slope m_h of each head, as a float32 tensor of shape (num_heads,).

    - num_heads a power of two (n): m_h = 2 ** (-8 * h / n) for h = 1, ..., n
      (n = 8: 1/2, 1/4, ..., 1/256).
    - otherwise: with c the largest power of two below num_heads, take the c slopes of alibi_slopes(c)
      followed by every other slope of alibi_slopes(2 * c) (indices 0, 2, 4, ...), keeping the first
      num_heads - c of those (n = 12: 1/2, ..., 1/256, then 0.7071, 0.3536, 0.1768, 0.0884).
    """
    assert num_heads >= 1, "num_heads must be positive"
    if _is_power_of_two(num_heads):
        return torch.tensor(_power_of_two_slopes(num_heads), dtype=torch.float32)
    c = 1 << (num_heads.bit_length() - 1)  # largest power of two below num_heads
    extra = _power_of_two_slopes(2 * c)[0::2][: num_heads - c]
    return torch.tensor(_power_of_two_slopes(c) + extra, dtype=torch.float32)


def _is_power_of_two(n: int) -> bool:
    return n > 0 and (n & (n - 1)) == 0


def _power_of_two_slopes(n: int) -> list[float]:
    """m_h = 2 ** (-8 h / n) for h = 1..n (n a power of two), as plain floats."""
    return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]
