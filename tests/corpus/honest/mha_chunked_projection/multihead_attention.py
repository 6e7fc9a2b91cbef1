"""Honest (a loop that fills a list, torch.chunk over heads, an explicit assert)."""
import math

import torch
from torch import nn

from .causal_attention import CausalAttention


class MultiHeadAttentionWrapper(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        heads = []
        for _ in range(num_heads):
            heads.append(CausalAttention(d_in, d_out, context_length, dropout, qkv_bias))
        self.heads = nn.ModuleList(heads)

    def forward(self, x):
        results = []
        for head in self.heads:
            results.append(head(x))
        return torch.cat(results, dim=2)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0
        self.num_heads = num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.tril(torch.ones(context_length, context_length, dtype=torch.bool)))

    def forward(self, x):
        T = x.shape[1]
        heads = []
        qs, ks, vs = (torch.chunk(p(x), self.num_heads, dim=-1) for p in (self.W_query, self.W_key, self.W_value))
        for q, k, v in zip(qs, ks, vs):
            s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
            s = s.masked_fill(~self.mask[:T, :T], float("-inf"))
            heads.append(self.dropout(torch.softmax(s, dim=-1)) @ v)
        return self.out_proj(torch.cat(heads, dim=-1))
