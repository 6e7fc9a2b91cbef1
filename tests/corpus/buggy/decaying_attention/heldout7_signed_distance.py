"""Bug: The decay uses the signed distance i - j instead of |i - j|, so keys in the future get a bonus instead of a penalty.

Misconception: decay-sign
Held out: yes
Source: https://github.com/ofirpress/attention_with_linear_biases/issues/17 (causal ALiBi bias -(i - j) only defined for j <= i, reused for bidirectional attention); written from scratch
"""

from __future__ import annotations

import math

import torch
from torch import nn


class DecayingAttention(nn.Module):
    """Multi-head self-attention with a learnable per-head distance penalty."""

    def __init__(self, embed_dim: int, num_heads: int) -> None:
        super().__init__()
        assert embed_dim % num_heads == 0, "embed_dim must be divisible by num_heads"
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.gamma = nn.Parameter(torch.ones(num_heads, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, L, C = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.num_heads, self.head_dim).unbind(dim=2)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, H, L, hd)
        logits = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        idx = torch.arange(L, device=x.device, dtype=logits.dtype)
        rel = idx[:, None] - idx[None, :]  # i - j: how far back key j is
        logits = logits - self.gamma * rel
        out = torch.softmax(logits, dim=-1) @ v
        return out.transpose(1, 2).reshape(B, L, C)


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """ALiBi slopes, as in the paper's get_slopes."""
    assert num_heads >= 1, "num_heads must be positive"

    def pow2(n: int) -> list[float]:
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(num_heads).is_integer():
        return torch.tensor(pow2(num_heads), dtype=torch.float32)
    closest = 2 ** math.floor(math.log2(num_heads))
    slopes = pow2(closest) + pow2(2 * closest)[0::2][: num_heads - closest]
    return torch.tensor(slopes, dtype=torch.float32)
