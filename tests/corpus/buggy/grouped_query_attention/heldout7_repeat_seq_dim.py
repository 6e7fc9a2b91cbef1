"""Bug: repeat_interleave is applied on the sequence dimension (dim=2) instead of the head dimension, so with num_kv_heads < num_heads the shapes break.

Misconception: unlisted
Held out: yes
Source: https://github.com/PrimeIntellect-ai/prime-rl/pull/2681 (GQA expansion with repeat_interleave on the sequence dim instead of the kv-head dim); written from scratch
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .rope import apply_rope, rope_frequencies


class GroupedQueryAttention(nn.Module):
    """Causal grouped-query self-attention with an output projection."""

    def __init__(self, d_model: int, num_heads: int, num_kv_heads: int, dropout: float = 0.0, bias: bool = False,
                 rope: bool = False, max_len: int = 2048, rope_base: float = 10000.0) -> None:
        super().__init__()
        if d_model % num_heads:
            raise ValueError("d_model must be divisible by num_heads")
        if num_kv_heads < 1 or num_heads % num_kv_heads:
            raise ValueError("num_heads must be a multiple of num_kv_heads")
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = d_model // num_heads
        self.max_len = max_len
        self.use_rope = rope
        self.W_query = nn.Linear(d_model, num_heads * self.head_dim, bias=bias)
        self.W_key = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=bias)
        self.W_value = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
        if rope:
            cos, sin = rope_frequencies(self.head_dim, max_len, rope_base)
            self.register_buffer("rope_cos", cos)
            self.register_buffer("rope_sin", sin)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        if t > self.max_len:
            raise ValueError(f"sequence length {t} exceeds max_len {self.max_len}")
        q = self.W_query(x).view(b, t, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.W_key(x).view(b, t, self.num_kv_heads, self.head_dim).transpose(1, 2)
        v = self.W_value(x).view(b, t, self.num_kv_heads, self.head_dim).transpose(1, 2)
        if self.use_rope:
            q = apply_rope(q, self.rope_cos, self.rope_sin)
            k = apply_rope(k, self.rope_cos, self.rope_sin)
        n_rep = self.num_heads // self.num_kv_heads
        k = k.repeat_interleave(n_rep, dim=2)
        v = v.repeat_interleave(n_rep, dim=2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
        causal = torch.tril(torch.ones(t, t, dtype=torch.bool, device=x.device))
        att = att.masked_fill(~causal, float("-inf"))
        att = self.dropout(torch.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, d)
        return self.out_proj(y)
