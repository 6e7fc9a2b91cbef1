"""Self-attention with one shared helper (ben)."""

from __future__ import annotations

import math

import torch
from torch import nn


def attend(queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    dimension = keys.shape[-1]
    scores = torch.matmul(queries, keys.transpose(-1, -2))
    scores = scores / math.sqrt(dimension)
    weights = torch.softmax(scores, dim=-1)
    return torch.matmul(weights, values)


class SelfAttentionV1(nn.Module):
    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__()
        self.W_query = nn.Parameter(torch.rand(d_in, d_out))
        self.W_key = nn.Parameter(torch.rand(d_in, d_out))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        queries = torch.matmul(x, self.W_query)
        keys = torch.matmul(x, self.W_key)
        values = torch.matmul(x, self.W_value)
        return attend(queries, keys, values)


class SelfAttentionV2(nn.Module):
    def __init__(self, d_in: int, d_out: int, qkv_bias: bool = False) -> None:
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        queries = self.W_query(x)
        keys = self.W_key(x)
        values = self.W_value(x)
        return attend(queries, keys, values)
