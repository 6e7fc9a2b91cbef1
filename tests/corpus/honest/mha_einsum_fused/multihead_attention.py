"""Honest (einsum over heads; the wrapper as a comprehension)."""
import torch
from torch import nn

from .causal_attention import CausalAttention


class MultiHeadAttentionWrapper(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.heads = nn.ModuleList([CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)
                                    for _ in range(num_heads)])

    def forward(self, x):
        return torch.cat([h(x) for h in self.heads], -1)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads:
            raise ValueError(f"d_out={d_out} is not divisible by num_heads={num_heads}")
        self.h, self.hd = num_heads, d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.ones(context_length, context_length).tril().bool())

    def forward(self, x):
        B, T, _ = x.shape
        q, k, v = (p(x).unflatten(-1, (self.h, self.hd)) for p in (self.W_query, self.W_key, self.W_value))
        s = torch.einsum("bthd,bshd->bhts", q, k) * self.hd ** -0.5
        s = s.masked_fill(~self.mask[:T, :T], float("-inf"))
        ctx = torch.einsum("bhts,bshd->bthd", self.dropout(s.softmax(-1)), v)
        return self.out_proj(ctx.flatten(-2))
