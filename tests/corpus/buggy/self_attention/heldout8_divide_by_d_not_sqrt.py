"""Bug: both V1 and V2 divide the scores by d_out (keys.shape[-1]) instead of sqrt(d_out), so the attention weights are too flat whenever d_out > 1.

Misconception: wrong-scale
Held out: yes
Source: seed notebook 001_6d8b84533e267197.txt (`torch.softmax(masked/keys.shape[-1], dim=-1)`, the square root forgotten); written from scratch
"""

import torch
from torch import nn


def _attend(queries, keys, values):
    d_k = keys.shape[-1]
    scores = queries @ keys.transpose(-2, -1)
    weights = torch.softmax(scores / d_k, dim=-1)
    return weights @ values


class SelfAttentionV1(nn.Module):
    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__()
        self.W_query = nn.Parameter(torch.rand(d_in, d_out))
        self.W_key = nn.Parameter(torch.rand(d_in, d_out))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _attend(x @ self.W_query, x @ self.W_key, x @ self.W_value)


class SelfAttentionV2(nn.Module):
    def __init__(self, d_in: int, d_out: int, qkv_bias: bool = False) -> None:
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _attend(self.W_query(x), self.W_key(x), self.W_value(x))
