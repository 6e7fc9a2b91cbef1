"""Self-attention, projections in a loop (chen)."""

from __future__ import annotations

import math

import torch
from torch import nn


class SelfAttentionV1(nn.Module):
    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__()
        self.W_query, self.W_key, self.W_value = (nn.Parameter(torch.rand(d_in, d_out)) for _ in range(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = (x @ w for w in (self.W_query, self.W_key, self.W_value))
        return (q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])).softmax(-1) @ v


class SelfAttentionV2(nn.Module):
    def __init__(self, d_in: int, d_out: int, qkv_bias: bool = False) -> None:
        super().__init__()
        self.W_query, self.W_key, self.W_value = (nn.Linear(d_in, d_out, qkv_bias) for _ in range(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = (layer(x) for layer in (self.W_query, self.W_key, self.W_value))
        return (q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])).softmax(-1) @ v
