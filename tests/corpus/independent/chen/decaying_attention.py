"""Attention with a learned distance penalty, split projections (chen)."""

from __future__ import annotations

import math

import torch
from torch import nn


class DecayingAttention(nn.Module):
    def __init__(self, embed_dim: int, num_heads: int) -> None:
        super().__init__()
        assert embed_dim % num_heads == 0, "embed_dim must be divisible by num_heads"
        self.h = num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.gamma = nn.Parameter(torch.ones(num_heads, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.reshape(b, n, self.h, -1).permute(0, 2, 1, 3)

        q, k, v = map(heads, self.qkv(x).split(c, dim=-1))
        i = torch.arange(n, device=x.device)
        s = q @ k.mT / math.sqrt(c // self.h) - self.gamma * (i[:, None] - i).abs()
        return (s.softmax(-1) @ v).permute(0, 2, 1, 3).reshape(b, n, c)


def alibi_slopes(num_heads: int) -> torch.Tensor:
    assert num_heads >= 1, "num_heads must be positive"
    c = 2 ** (num_heads.bit_length() - 1)
    main = torch.pow(2.0, -8.0 * torch.arange(1, c + 1) / c)
    rest = torch.pow(2.0, -8.0 * torch.arange(1, 2 * (num_heads - c), 2) / (2 * c)) if num_heads > c else main[:0]
    return torch.cat([main, rest]).float()
