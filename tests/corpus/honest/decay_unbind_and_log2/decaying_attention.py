"""Honest (unbind, a distance matrix via torch.cdist-free broadcasting, slopes through math.log2)."""
import math

import torch
from torch import nn


class DecayingAttention(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        assert embed_dim % num_heads == 0
        self.num_heads = num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.gamma = nn.Parameter(torch.ones(num_heads, 1, 1))

    def forward(self, x):
        B, L, C = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4).unbind(0)
        i = torch.arange(L, device=x.device, dtype=x.dtype)
        dist = (i[:, None] - i[None, :]).abs()
        s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) - self.gamma * dist
        return (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, L, C)


def alibi_slopes(num_heads):
    c = 2 ** math.floor(math.log2(num_heads))
    base = [2 ** (-8 * (h + 1) / c) for h in range(c)]
    extra = [2 ** (-8 * (h + 1) / (2 * c)) for h in range(0, 2 * c, 2)][: num_heads - c]
    return torch.tensor(base + extra, dtype=torch.float32)
