# Multi-head attention (my version)
import torch
import torch.nn as nn

from .causal_attention import CausalAttention


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0, "heads must divide d_out"
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, inp):
        batch, n_tok, d_in = inp.shape
        # project
        q = self.W_query(inp)
        k = self.W_key(inp)
        v = self.W_value(inp)

        # split into heads
        q = q.view(batch, n_tok, self.num_heads, self.head_dim).transpose(1, 2)
        k = k.view(batch, n_tok, self.num_heads, self.head_dim).transpose(1, 2)
        v = v.view(batch, n_tok, self.num_heads, self.head_dim).transpose(1, 2)

        sc = q @ k.transpose(2, 3)
        m = self.mask.bool()[:n_tok, :n_tok]
        sc = sc.masked_fill(m, -torch.inf)
        w = torch.softmax(sc / self.d_out ** 0.5, dim=-1)
        w = self.dropout(w)

        ctx = (w @ v).transpose(1, 2)
        ctx = ctx.contiguous().view(batch, n_tok, self.d_out)
        return self.out_proj(ctx)


class MultiHeadAttentionWrapper(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.heads = nn.ModuleList(
            [CausalAttention(d_in, d_out, context_length, dropout, qkv_bias) for _ in range(num_heads)]
        )

    def forward(self, inp):
        return torch.cat([h(inp) for h in self.heads], dim=-1)
