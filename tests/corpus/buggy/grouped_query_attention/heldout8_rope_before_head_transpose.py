"""Bug: RoPE is applied to q and k while they are still laid out (B, T, H, hd), before the transpose to (B, H, T, hd), so apply_rope treats the head axis as the sequence axis: each head is rotated by its head index instead of each token by its position.

Misconception: rope-before-head-split
Held out: yes
Source: https://github.com/facebookresearch/xformers/issues/841 (RotaryEmbedding applied along the wrong dimension for the [B, M, H, K] layout); written from scratch
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .rope import apply_rope, rope_frequencies


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, dropout=0.0, bias=False, rope=False, max_len=2048,
                 rope_base=10000.0):
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
        self.W_query = nn.Linear(d_model, d_model, bias=bias)
        self.W_key = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=bias)
        self.W_value = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
        if rope:
            cos, sin = rope_frequencies(self.head_dim, max_len, rope_base)
            self.register_buffer("rope_cos", cos)
            self.register_buffer("rope_sin", sin)

    def forward(self, x):
        B, T, D = x.shape
        if T > self.max_len:
            raise ValueError("sequence longer than max_len")
        q = self.W_query(x).view(B, T, self.num_heads, self.head_dim)
        k = self.W_key(x).view(B, T, self.num_kv_heads, self.head_dim)
        v = self.W_value(x).view(B, T, self.num_kv_heads, self.head_dim)
        if self.use_rope:
            q = apply_rope(q, self.rope_cos, self.rope_sin)
            k = apply_rope(k, self.rope_cos, self.rope_sin)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)

        rep = self.num_heads // self.num_kv_heads
        k = torch.repeat_interleave(k, rep, dim=1)
        v = torch.repeat_interleave(v, rep, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        causal = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))
        att = att.masked_fill(~causal, float("-inf"))
        att = self.dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, D)
        return self.out_proj(y)
