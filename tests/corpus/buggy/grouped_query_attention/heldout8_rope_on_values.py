"""Bug: with rope=True the values are rotated too (apply_rope on v as well as q and k), which puts absolute position into the outputs; without RoPE the module is correct.

Misconception: rope-on-values
Held out: yes
Source: https://github.com/lucidrains/x-transformers/issues/182 (rotary embedding also rotated the values; removed in 1.20.0); from the reference
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
            raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
        if num_kv_heads < 1 or num_heads % num_kv_heads != 0:
            raise ValueError(f"num_heads ({num_heads}) must be a multiple of num_kv_heads ({num_kv_heads})")
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        self.head_dim = d_model // num_heads
        self.max_len = max_len
        kv_dim = num_kv_heads * self.head_dim  # smaller than d_model unless num_kv_heads == num_heads
        self.W_query = nn.Linear(d_model, d_model, bias=bias)
        self.W_key = nn.Linear(d_model, kv_dim, bias=bias)
        self.W_value = nn.Linear(d_model, kv_dim, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self.use_rope = rope
        if rope:
            cos, sin = rope_frequencies(self.head_dim, max_len, rope_base)  # (max_len, hd/2) each
            self.register_buffer("rope_cos", cos)
            self.register_buffer("rope_sin", sin)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Causal grouped-query self-attention over `x` (B, T, d_model), 1 <= T <= max_len.

        Returns:
            (B, T, d_model).
        """
        # q: (B, T, d_model) -> (B, T, H, hd) -> (B, H, T, hd); k, v: (B, T, Hkv * hd) -> (B, Hkv, T, hd)
        # grouped k, v: (B, H, T, hd); scores, weights: (B, H, T, T); context: (B, H, T, hd) -> (B, T, d_model)
        B, T, d_model = x.shape
        if T > self.max_len:
            raise ValueError(f"sequence length {T} exceeds max_len {self.max_len}")
        H, Hkv, hd = self.num_heads, self.num_kv_heads, self.head_dim
        q = self.W_query(x).view(B, T, H, hd).transpose(1, 2)  # (B, H, T, hd)
        k = self.W_key(x).view(B, T, Hkv, hd).transpose(1, 2)  # (B, Hkv, T, hd)
        v = self.W_value(x).view(B, T, Hkv, hd).transpose(1, 2)  # (B, Hkv, T, hd)
        if self.use_rope:  # positions 0 .. T-1; values carry content, not position: never rotated
            q = apply_rope(q, self.rope_cos, self.rope_sin)
            k = apply_rope(k, self.rope_cos, self.rope_sin)
            v = apply_rope(v, self.rope_cos, self.rope_sin)

        group = H // Hkv
        k = k.repeat_interleave(group, dim=1)  # (B, H, T, hd): query head h reads kv head h // group
        v = v.repeat_interleave(group, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(hd)  # (B, H, T, T), scaled by the HEAD dim
        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()  # key j <= query i
        weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
        weights = self.dropout(weights)  # training mode only

        context = (weights @ v).transpose(1, 2).reshape(B, T, d_model)  # (B, H, T, hd) -> (B, T, d_model)
        return self.out_proj(context)
