"""Multi-head attention by reshape and permute (chen)."""

from __future__ import annotations

import math

import torch
from torch import nn

from .causal_attention import CausalAttention


class MultiHeadAttentionWrapper(nn.Module):
    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 qkv_bias: bool = False) -> None:
        super().__init__()
        self.heads = nn.ModuleList(map(lambda _: CausalAttention(d_in, d_out, context_length, dropout, qkv_bias),
                                       range(num_heads)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.concat([*map(lambda m: m(x), self.heads)], dim=x.dim() - 1)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 qkv_bias: bool = False) -> None:
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        self.h = num_heads
        self.context_length = context_length
        self.W_query, self.W_key, self.W_value = (nn.Linear(d_in, d_out, qkv_bias) for _ in range(3))
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("bias", torch.full((context_length, context_length), -math.inf).triu(1))

    def split(self, t: torch.Tensor) -> torch.Tensor:
        b, n, _ = t.shape
        return t.reshape(b, n, self.h, -1).permute(0, 2, 1, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        assert n <= self.context_length, f"sequence length {n} exceeds context_length {self.context_length}"
        q, k, v = (self.split(f(x)) for f in (self.W_query, self.W_key, self.W_value))
        s = q @ k.mT / math.sqrt(q.shape[-1]) + self.bias[:n, :n]
        out = self.dropout(s.softmax(-1)) @ v
        return self.out_proj(out.permute(0, 2, 1, 3).reshape(b, n, -1))
