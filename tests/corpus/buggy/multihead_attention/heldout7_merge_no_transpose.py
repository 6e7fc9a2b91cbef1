"""Bug: MultiHeadAttention merges the heads with view(B, T, d_out) straight from (B, H, T, hd), without transposing back, scrambling tokens and heads.

Misconception: heads-no-transpose
Held out: yes
Source: https://github.com/jsbaan/transformer-from-scratch/pull/6 (missing permute before the reshape that merges heads) and https://github.com/ajhalthor/Transformer-Neural-Network/issues/8; written from scratch
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .causal_attention import CausalAttention


class MultiHeadAttentionWrapper(nn.Module):
    """num_heads CausalAttention heads, concatenated on the last dim."""

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 qkv_bias: bool = False) -> None:
        super().__init__()
        self.heads = nn.ModuleList()
        for _ in range(num_heads):
            self.heads.append(CausalAttention(d_in, d_out, context_length, dropout, qkv_bias))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outs = [h(x) for h in self.heads]
        return torch.cat(outs, dim=-1)


class MultiHeadAttention(nn.Module):
    """Fused multi-head causal self-attention."""

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 qkv_bias: bool = False) -> None:
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        self.d_out, self.num_heads, self.head_dim = d_out, num_heads, d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def _split(self, t: torch.Tensor) -> torch.Tensor:
        b, n, _ = t.shape
        return t.view(b, n, self.num_heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        q, k, v = self._split(self.W_query(x)), self._split(self.W_key(x)), self._split(self.W_value(x))
        att = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        att = att.masked_fill(self.mask.bool()[:n, :n], float("-inf"))
        att = self.dropout(torch.softmax(att, dim=-1))
        ctx = att @ v  # (b, H, n, hd)
        ctx = ctx.contiguous().view(b, n, self.d_out)  # concatenate the heads
        return self.out_proj(ctx)
