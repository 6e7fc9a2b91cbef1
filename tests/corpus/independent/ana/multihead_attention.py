"""Multi-head attention with einsum over heads (ana)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .causal_attention import CausalAttention


class MultiHeadAttentionWrapper(nn.Module):
    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 qkv_bias: bool = False) -> None:
        super().__init__()
        self.heads = nn.ModuleList(CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)
                                   for _ in range(num_heads))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat(tuple(h(x) for h in self.heads), -1)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 qkv_bias: bool = False) -> None:
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        self.num_heads = num_heads
        self.context_length = context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.size(1)
        assert n <= self.context_length, f"sequence length {n} exceeds context_length {self.context_length}"
        q = self.W_query(x).unflatten(-1, (self.num_heads, -1))
        k = self.W_key(x).unflatten(-1, (self.num_heads, -1))
        v = self.W_value(x).unflatten(-1, (self.num_heads, -1))
        logits = torch.einsum("bqhd,bkhd->bhqk", q, k) * q.size(-1) ** -0.5
        future = torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1)
        probs = self.dropout(F.softmax(logits.masked_fill(future, float("-inf")), dim=-1))
        return self.out_proj(torch.einsum("bhqk,bkhd->bqhd", probs, v).flatten(2))
