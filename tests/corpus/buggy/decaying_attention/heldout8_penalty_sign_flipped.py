"""Bug: the distance penalty is added instead of subtracted (scores + gamma * |i - j|), so far-away tokens get MORE weight instead of less.

Misconception: decay-sign
Held out: yes
Source: https://github.com/meta-pytorch/attention-gym/pull/86 (fix alibi bias: the distance term had the wrong sign); from the reference
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
        self.gamma = nn.Parameter(torch.ones(num_heads, 1, 1))  # (H, 1, 1): broadcasts over (H, L, L)

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
        q, k, v = qkv[0], qkv[1], qkv[2]  # each (B, H, L, hd)

        scores = q @ k.transpose(-2, -1) / math.sqrt(hd)  # (B, H, L, L)
        pos = torch.arange(L, device=x.device)
        distance = (pos.view(L, 1) - pos.view(1, L)).abs().to(scores.dtype)  # (L, L): |i - j|
        scores = scores + self.gamma * distance  # (H, 1, 1) * (L, L) -> (H, L, L): one decay per head

        weights = torch.softmax(scores, dim=-1)  # (B, H, L, L)
        return (weights @ v).transpose(1, 2).reshape(B, L, C)  # (B, H, L, hd) -> (B, L, H, hd) -> (B, L, C)


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """The ALiBi slope m_h of each head, as a float32 tensor of shape (num_heads,).

    - num_heads a power of two (n): m_h = 2 ** (-8 * h / n) for h = 1, ..., n
      (n = 8: 1/2, 1/4, ..., 1/256).
    - otherwise: with c the largest power of two below num_heads, take the c slopes of alibi_slopes(c)
      followed by every other slope of alibi_slopes(2 * c) (indices 0, 2, 4, ...), keeping the first
      num_heads - c of those (n = 12: 1/2, ..., 1/256, then 0.7071, 0.3536, 0.1768, 0.0884).
    """
    assert num_heads >= 1, "num_heads must be positive"
    def power_of_two(n: int) -> list[float]:
        return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]

    c = 1 << (num_heads.bit_length() - 1)  # the largest power of two <= num_heads
    slopes = power_of_two(c)
    if c != num_heads:
        slopes += power_of_two(2 * c)[0::2][: num_heads - c]
    return torch.tensor(slopes, dtype=torch.float32)
