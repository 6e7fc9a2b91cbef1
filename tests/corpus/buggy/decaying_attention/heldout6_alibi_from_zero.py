"""Bug: alibi_slopes starts the exponent at h = 0, so the first slope is 1 and every slope is off by one factor.

Misconception: slopes-wrong
Held out: yes
Source: pitfall: off-by-one in h = 1..n; written from scratch
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
        self.qkv = nn.Linear(embed_dim, embed_dim * 3)
        self.gamma = nn.Parameter(torch.ones(num_heads, 1, 1))

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
        qkv = self.qkv(x).reshape(B, L, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = (q @ k.transpose(-2, -1)) / (self.head_dim ** 0.5)
        indices = torch.arange(L, device=x.device)
        distance_matrix = torch.abs(indices.view(L, 1) - indices.view(1, L))
        decay_bias = -self.gamma * distance_matrix.unsqueeze(0)
        scores = scores + decay_bias
        attn = torch.softmax(scores, dim=-1)
        out = (attn @ v).transpose(1, 2).reshape(B, L, C)
        return out


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """The ALiBi slope m_h of each head, as a float32 tensor of shape (num_heads,).

    - num_heads a power of two (n): m_h = 2 ** (-8 * h / n) for h = 1, ..., n
      (n = 8: 1/2, 1/4, ..., 1/256).
    - otherwise: with c the largest power of two below num_heads, take the c slopes of alibi_slopes(c)
      followed by every other slope of alibi_slopes(2 * c) (indices 0, 2, 4, ...), keeping the first
      num_heads - c of those (n = 12: 1/2, ..., 1/256, then 0.7071, 0.3536, 0.1768, 0.0884).
    """
    assert num_heads >= 1, "num_heads must be positive"
    def get_slopes(n):
        start = 2 ** (-8 / n)
        return [start ** i for i in range(n)]

    if math.log2(num_heads).is_integer():
        slopes = get_slopes(num_heads)
    else:
        closest = 2 ** math.floor(math.log2(num_heads))
        slopes = get_slopes(closest) + get_slopes(2 * closest)[0::2][: num_heads - closest]
    return torch.tensor(slopes, dtype=torch.float32)
