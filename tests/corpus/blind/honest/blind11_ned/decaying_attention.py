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
import torch.nn.functional as F
from torch import nn


class ScaledDotScores(nn.Module):
    """q @ k^T / sqrt(d_k) over the last two dims: (..., L, d_k) x (..., S, d_k) -> (..., L, S)."""

    def forward(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        return (queries @ keys.transpose(-2, -1)) / math.sqrt(keys.shape[-1])

    def extra_repr(self) -> str:
        return "scale=1/sqrt(d_k)"


class DistanceDecay(nn.Module):
    """Subtracts a per-head distance penalty from (B, H, L, S) scores: scores - rate[h] * |i - j|.

    The rate (shape (H, 1, 1)) is passed in, so the module that owns it decides whether it is learned.
    """

    def forward(self, scores: torch.Tensor, rate: torch.Tensor) -> torch.Tensor:
        query_pos = torch.arange(scores.shape[-2], device=scores.device)
        key_pos = torch.arange(scores.shape[-1], device=scores.device)
        distance = (query_pos[:, None] - key_pos[None, :]).abs().to(dtype=scores.dtype)   # (L, S)
        return scores - rate * distance                                                    # (H, L, S) broadcast


class DecayingAttention(nn.Module):
    """Multi-head self-attention with a learnable per-head distance penalty (no mask, no out_proj).

    Attributes (the names are part of the contract: tests load weights by name):
        qkv:   nn.Linear(embed_dim, 3 * embed_dim) (with bias): one projection for q, k and v
        gamma: nn.Parameter of shape (num_heads, 1, 1), initialised to ones: the decay of each head
    """

    def __init__(self, embed_dim: int, num_heads: int) -> None:
        super().__init__()
        assert embed_dim % num_heads == 0, "embed_dim must be divisible by num_heads"
        self.embed_dim: int = embed_dim
        self.num_heads: int = num_heads
        self.head_dim: int = embed_dim // num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.gamma = nn.Parameter(torch.ones(num_heads, 1, 1))
        self.scores = ScaledDotScores()
        self.decay = DistanceDecay()

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
        qkv = self.qkv(x).unflatten(-1, (3, self.num_heads, self.head_dim)).permute(2, 0, 3, 1, 4)
        queries, keys, values = qkv.unbind(0)
        scores = self.decay(self.scores(queries, keys), self.gamma)
        weights = F.softmax(scores, dim=-1)
        context = weights @ values                                   # (B, H, L, hd)
        return context.permute(0, 2, 1, 3).contiguous().flatten(-2)  # (B, L, embed_dim)

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, head_dim={self.head_dim}"


class AlibiSlopes(nn.Module):
    """The fixed ALiBi slopes of `num_heads` heads, kept in the (non-persistent) buffer `slopes`."""

    slopes: torch.Tensor  # registered buffer, (num_heads,), float32

    def __init__(self, num_heads: int) -> None:
        super().__init__()
        self.num_heads: int = num_heads
        self.register_buffer("slopes", self.compute(num_heads), persistent=False)

    @staticmethod
    def geometric(n: int) -> torch.Tensor:
        """2 ** (-8 * h / n) for h = 1, ..., n, in float64."""
        exponents = torch.arange(1, n + 1, dtype=torch.float64)
        return torch.pow(2.0, -8.0 * exponents / n)

    @classmethod
    def compute(cls, num_heads: int) -> torch.Tensor:
        """The standard slopes, float32 (num_heads,)."""
        closest = 2 ** int(math.floor(math.log2(num_heads)))  # largest power of two <= num_heads
        if closest == num_heads:
            return cls.geometric(num_heads).to(dtype=torch.float32)
        extra = cls.geometric(2 * closest)[0::2][: num_heads - closest]
        return torch.cat([cls.geometric(closest), extra]).to(dtype=torch.float32)

    def forward(self) -> torch.Tensor:
        return self.slopes

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}"


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """The ALiBi slope m_h of each head, as a float32 tensor of shape (num_heads,).

    - num_heads a power of two (n): m_h = 2 ** (-8 * h / n) for h = 1, ..., n
      (n = 8: 1/2, 1/4, ..., 1/256).
    - otherwise: with c the largest power of two below num_heads, take the c slopes of alibi_slopes(c)
      followed by every other slope of alibi_slopes(2 * c) (indices 0, 2, 4, ...), keeping the first
      num_heads - c of those (n = 12: 1/2, ..., 1/256, then 0.7071, 0.3536, 0.1768, 0.0884).
    """
    assert num_heads >= 1, "num_heads must be positive"
    return AlibiSlopes(num_heads)()
