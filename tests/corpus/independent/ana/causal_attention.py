"""Causal attention, the mask made on each call (ana)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class CausalAttention(nn.Module):
    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, qkv_bias: bool = False) -> None:
        super().__init__()
        self.context_length = context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.size(1)
        assert n <= self.context_length, f"sequence length {n} exceeds context_length {self.context_length}"
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)
        future = torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1)
        logits = torch.einsum("btd,bsd->bts", q, k).masked_fill(future, float("-inf"))
        return self.dropout(F.softmax(logits * k.size(-1) ** -0.5, dim=-1)) @ v
