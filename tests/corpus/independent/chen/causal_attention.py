"""Causal attention with an additive bias buffer (chen)."""

from __future__ import annotations

import math

import torch
from torch import nn


class CausalAttention(nn.Module):
    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, qkv_bias: bool = False) -> None:
        super().__init__()
        self.context_length = context_length
        self.W_query, self.W_key, self.W_value = (nn.Linear(d_in, d_out, qkv_bias) for _ in range(3))
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("bias", torch.full((context_length, context_length), -math.inf).triu(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = x.shape[-2]
        assert t <= self.context_length, f"sequence length {t} exceeds context_length {self.context_length}"
        q, k, v = (f(x) for f in (self.W_query, self.W_key, self.W_value))
        s = q @ k.mT / math.sqrt(q.shape[-1]) + self.bias[:t, :t]
        return self.dropout(s.softmax(-1)) @ v
