"""Attention with a learned distance penalty, head by head (ben)."""

from __future__ import annotations

import math

import torch
from torch import nn


class DecayingAttention(nn.Module):
    def __init__(self, embed_dim: int, num_heads: int) -> None:
        super().__init__()
        assert embed_dim % num_heads == 0, "embed_dim must be divisible by num_heads"
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.gamma = nn.Parameter(torch.ones(num_heads, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch_size, length, channels = x.shape
        projected = self.qkv(x)
        queries = projected[..., :channels]
        keys = projected[..., channels:2 * channels]
        values = projected[..., 2 * channels:]
        positions = torch.arange(length, device=x.device)
        distance = torch.abs(positions.unsqueeze(1) - positions.unsqueeze(0)).float()
        outputs = []
        for head in range(self.num_heads):
            part = slice(head * self.head_dim, (head + 1) * self.head_dim)
            scores = torch.matmul(queries[..., part], keys[..., part].transpose(1, 2))
            scores = scores / math.sqrt(self.head_dim)
            scores = scores - self.gamma[head] * distance.to(scores.dtype)
            weights = torch.softmax(scores, dim=-1)
            outputs.append(torch.matmul(weights, values[..., part]))
        return torch.cat(outputs, dim=-1)


def alibi_slopes(num_heads: int) -> torch.Tensor:
    assert num_heads >= 1, "num_heads must be positive"
    closest = 1
    while closest * 2 <= num_heads:
        closest *= 2
    slopes = []
    for h in range(1, closest + 1):
        slopes.append(2.0 ** (-8.0 * h / closest))
    for h in range(1, 2 * (num_heads - closest), 2):
        slopes.append(2.0 ** (-8.0 * h / (2 * closest)))
    return torch.tensor(slopes, dtype=torch.float32)
