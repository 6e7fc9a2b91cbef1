"""Attention with a learned distance penalty, chunked projections (ana)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class DecayingAttention(nn.Module):
    def __init__(self, embed_dim: int, num_heads: int) -> None:
        super().__init__()
        assert embed_dim % num_heads == 0, "embed_dim must be divisible by num_heads"
        self.num_heads = num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.gamma = nn.Parameter(torch.ones(num_heads, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = (t.unflatten(-1, (self.num_heads, -1)) for t in self.qkv(x).chunk(3, dim=-1))
        logits = torch.einsum("blhd,bmhd->bhlm", q, k) * q.size(-1) ** -0.5
        idx = torch.arange(x.size(1), device=x.device, dtype=logits.dtype)[:, None]
        logits = logits - self.gamma * torch.cdist(idx, idx, p=1)
        return torch.einsum("bhlm,bmhd->blhd", F.softmax(logits, dim=-1), v).flatten(2)


def alibi_slopes(num_heads: int) -> torch.Tensor:
    assert num_heads >= 1, "num_heads must be positive"

    def geometric(n: int) -> list[float]:
        start = 2 ** (-8 / n)
        return [start ** (i + 1) for i in range(n)]

    base = 2 ** math.floor(math.log2(num_heads))
    return torch.tensor(geometric(base) + geometric(2 * base)[::2][: num_heads - base],
                        dtype=torch.float32)
