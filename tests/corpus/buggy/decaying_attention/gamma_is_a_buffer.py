"""Bug: gamma is a registered buffer, not an nn.Parameter, so it never learns (source: seed 000 line ~27 'learnable decay scale').

Misconception: gamma-not-parameter
"""

import math

import torch
import torch.nn.functional as F
from torch import nn


class DecayingAttention(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.qkv = nn.Linear(embed_dim, embed_dim * 3)
        self.register_buffer("gamma", torch.ones(num_heads, 1, 1))

    def forward(self, x):
        B, L, C = x.shape
        qkv = self.qkv(x).reshape(B, L, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        indices = torch.arange(L, device=x.device)
        distance_matrix = torch.abs(indices.view(L, 1) - indices.view(1, L))
        scores = (q @ k.transpose(-2, -1)) / (self.head_dim ** 0.5)
        scores = scores + (-self.gamma * distance_matrix.unsqueeze(0))
        attn = F.softmax(scores, dim=-1)
        return (attn @ v).transpose(1, 2).reshape(B, L, C)


def alibi_slopes(num_heads):
    def pow2(n):
        return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]

    c = 2 ** math.floor(math.log2(num_heads))
    slopes = pow2(c)
    if c != num_heads:
        slopes += pow2(2 * c)[0::2][: num_heads - c]
    return torch.tensor(slopes, dtype=torch.float32)
