"""Bug: the causal mask is built with triu(diagonal=2), so every token also sees the next one.

Misconception: mask-one-ahead
Held out: yes
Source: pitfall: off-by-one in the triu diagonal; written from scratch
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .rope import apply_rope, rope_frequencies


class GroupedQueryAttention(nn.Module):
    """Causal grouped-query self-attention with an output projection.

    Args:
        d_model: model width; must be divisible by num_heads (raise ValueError otherwise).
        num_heads: number of query heads H; head_dim = d_model // num_heads.
        num_kv_heads: number of key/value heads; must divide num_heads (raise ValueError otherwise).
        dropout: dropout probability on the attention weights (training mode only).
        bias: whether all four linear layers have a bias (Llama: none).
        rope: rotate queries and keys with RoPE (rope.py, half-split pairing) at positions 0 .. T-1.
        max_len: the longest sequence accepted (raise ValueError in forward beyond it); the RoPE tables' length.
        rope_base: RoPE's base.

    Attributes the grader relies on (names appear in `state_dict()`):
        W_query: nn.Linear(d_model, d_model, bias=bias).
        W_key, W_value: nn.Linear(d_model, num_kv_heads * head_dim, bias=bias); kv head j is features
            [j * head_dim, (j + 1) * head_dim).
        out_proj: nn.Linear(d_model, d_model, bias=bias).
        dropout: nn.Dropout(dropout).
        num_heads, num_kv_heads, head_dim, max_len: ints; use_rope: bool.
        rope_cos, rope_sin: when rope=True, the tables `rope_frequencies(head_dim, max_len, rope_base)` (in
            that call's default dtype), registered as buffers (so that .to() moves them). The kv_cache exercise
            decodes through these attributes.
    """

    def __init__(self, d_model: int, num_heads: int, num_kv_heads: int, dropout: float = 0.0, bias: bool = False,
                 rope: bool = False, max_len: int = 2048, rope_base: float = 10000.0) -> None:
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("d_model must be divisible by num_heads")
        if num_kv_heads < 1 or num_heads % num_kv_heads != 0:
            raise ValueError("num_kv_heads must divide num_heads")
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

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Causal grouped-query self-attention over `x` (B, T, d_model), 1 <= T <= max_len.

        Returns:
            (B, T, d_model).
        """
        # q: (B, T, d_model) -> (B, T, H, hd) -> (B, H, T, hd); k, v: (B, T, Hkv * hd) -> (B, Hkv, T, hd)
        # grouped k, v: (B, H, T, hd); scores, weights: (B, H, T, T); context: (B, H, T, hd) -> (B, T, d_model)
        b, num_tokens, d_model = x.shape
        if num_tokens > self.max_len:
            raise ValueError("sequence too long")
        queries = self.W_query(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        keys = self.W_key(x).view(b, num_tokens, self.num_kv_heads, self.head_dim).transpose(1, 2)
        values = self.W_value(x).view(b, num_tokens, self.num_kv_heads, self.head_dim).transpose(1, 2)
        if self.use_rope:
            queries = apply_rope(queries, self.rope_cos, self.rope_sin)
            keys = apply_rope(keys, self.rope_cos, self.rope_sin)
        group_size = self.num_heads // self.num_kv_heads
        keys = keys.repeat_interleave(group_size, dim=1)
        values = values.repeat_interleave(group_size, dim=1)
        attn_scores = queries @ keys.transpose(2, 3)
        mask = torch.triu(torch.ones(num_tokens, num_tokens, device=x.device, dtype=torch.bool), diagonal=2)
        attn_scores = attn_scores.masked_fill(mask, -torch.inf)
        attn_weights = torch.softmax(attn_scores / self.head_dim ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        context = (attn_weights @ values).transpose(1, 2).reshape(b, num_tokens, d_model)
        return self.out_proj(context)
