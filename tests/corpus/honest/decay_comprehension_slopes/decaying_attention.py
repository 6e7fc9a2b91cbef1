"""Honest (list comprehensions everywhere, torch.stack of per-head outputs)."""
import math

import torch
from torch import nn


class DecayingAttention(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        assert embed_dim % num_heads == 0
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.gamma = nn.Parameter(torch.ones(num_heads, 1, 1))

    def forward(self, x):
        B, L, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=-1)
        dist = torch.tensor([[abs(i - j) for j in range(L)] for i in range(L)], dtype=x.dtype, device=x.device)
        heads = [slice(h * self.head_dim, (h + 1) * self.head_dim) for h in range(self.num_heads)]
        outs = [torch.softmax(q[..., s] @ k[..., s].transpose(-2, -1) / math.sqrt(self.head_dim)
                              - self.gamma[h] * dist, dim=-1) @ v[..., s] for h, s in enumerate(heads)]
        return torch.cat(outs, dim=-1)


def alibi_slopes(num_heads):
    c = 1 << (num_heads.bit_length() - 1)
    first = [2.0 ** (-8.0 * h / c) for h in range(1, c + 1)]
    second = [2.0 ** (-8.0 * h / (2 * c)) for h in range(1, 2 * c + 1)][::2]
    return torch.tensor(first + second[: num_heads - c], dtype=torch.float32)
