"""Honest (a recursive helper for the slopes, a local named `vars`)."""
import math

import torch
from torch import nn


class DecayingAttention(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        assert embed_dim % num_heads == 0
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.gamma = nn.Parameter(torch.ones(num_heads, 1, 1))

    def forward(self, x):
        B, L, C = x.shape
        H = self.num_heads
        vars = self.qkv(x).reshape(B, L, 3, H, C // H)
        q, k, v = (vars[:, :, n].transpose(1, 2) for n in range(3))
        pos = torch.arange(L, device=x.device)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(C // H)
        scores = scores - self.gamma * (pos[None, :] - pos[:, None]).abs().to(scores.dtype)
        return torch.matmul(torch.softmax(scores, -1), v).transpose(1, 2).reshape(B, L, C)


def _powers(n):
    start = 2 ** (-8 / n)
    return [start ** (h + 1) for h in range(n)]


def alibi_slopes(num_heads):
    if math.log2(num_heads).is_integer():
        return torch.tensor(_powers(num_heads), dtype=torch.float32)
    c = 2 ** int(math.log2(num_heads))
    rest = alibi_slopes(2 * c)[0::2][: num_heads - c]
    return torch.cat([torch.tensor(_powers(c), dtype=torch.float32), rest])
