# Generated from solutions/grouped_query_attention.py by `grader build`. Your task: replace each
# `raise NotImplementedError(...)` with working code. Keep the names and signatures.
"""Exercise `grouped_query_attention`: causal self-attention where groups of query heads share one key/value head.

Multi-head attention keeps num_heads keys and values per token; at decoding time that KV cache dominates memory.
Grouped-query attention (GQA, Ainslie et al. 2023; Llama 2 70B, Llama 3, Mistral) keeps only num_kv_heads of them:
the num_heads query heads are split into num_kv_heads consecutive groups of g = num_heads // num_kv_heads, and
every head of group j uses key/value head j:

    query head h  ->  key/value head h // g        (heads 0..g-1 share kv head 0, heads g..2g-1 kv head 1, ...)

In code that is `k.repeat_interleave(g, dim=1)` on (B, num_kv_heads, T, hd), NOT `k.repeat(1, g, 1, 1)`, which
tiles the kv heads (0, 1, 0, 1, ...) and pairs query head 1 with kv head 1 instead of 0: same shapes, wrong result.
num_kv_heads = num_heads is ordinary multi-head attention; num_kv_heads = 1 is multi-query attention (MQA).

    head_dim = d_model // num_heads
    q = W_query(x)  (B, T, d_model)                 -> (B, T, H, hd)   -> (B, H, T, hd)
    k = W_key(x)    (B, T, num_kv_heads * hd)       -> (B, T, Hkv, hd) -> (B, Hkv, T, hd); v likewise
    with rope=True: rotate q and k (never v) with `apply_rope` from rope.py, positions 0 .. T-1
    scores = q @ k^T / sqrt(hd) with k grouped to H heads, causal mask, softmax over the keys, dropout on the
    weights (training mode only), @ v -> (B, H, T, hd) -> (B, T, H, hd) -> (B, T, d_model) -> out_proj

Conventions as in the first assignment: a boolean mask is True where a query may attend; dropout acts on the
attention weights. F.scaled_dot_product_attention and nn.MultiheadAttention are banned in this exercise.
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
        if num_heads < 1 or d_model % num_heads != 0:
            raise ValueError(f"d_model = {d_model} must be divisible by num_heads = {num_heads}")
        if num_kv_heads < 1 or num_heads % num_kv_heads != 0:
            raise ValueError(f"num_kv_heads = {num_kv_heads} must divide num_heads = {num_heads}")
        if max_len < 1:
            raise ValueError(f"max_len must be >= 1, got {max_len}")
        self.num_heads = num_heads                                  # H
        self.num_kv_heads = num_kv_heads                            # Hkv
        self.head_dim = d_model // num_heads                        # hd
        self.max_len = max_len
        self.use_rope = bool(rope)
        kv_width = num_kv_heads * self.head_dim                     # Hkv * hd
        self.W_query = nn.Linear(d_model, d_model, bias=bias)       # x (.., d) -> q (.., H * hd)
        self.W_key = nn.Linear(d_model, kv_width, bias=bias)        # x (.., d) -> k (.., Hkv * hd)
        self.W_value = nn.Linear(d_model, kv_width, bias=bias)      # x (.., d) -> v (.., Hkv * hd)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
        if self.use_rope:
            cos, sin = rope_frequencies(self.head_dim, max_len, rope_base)  # (max_len, hd/2) each
            self.register_buffer("rope_cos", cos)
            self.register_buffer("rope_sin", sin)
        else:
            self.rope_cos = None
            self.rope_sin = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Causal grouped-query self-attention over `x` (B, T, d_model), 1 <= T <= max_len.

        Returns:
            (B, T, d_model).
        """
        # q: (B, T, d_model) -> (B, T, H, hd) -> (B, H, T, hd); k, v: (B, T, Hkv * hd) -> (B, Hkv, T, hd)
        # grouped k, v: (B, H, T, hd); scores, weights: (B, H, T, T); context: (B, H, T, hd) -> (B, T, d_model)
        if x.dim() != 3:
            raise ValueError(f"x must be (B, T, d_model), got shape {tuple(x.shape)}")
        B, T, d = x.shape
        H, Hkv, hd = self.num_heads, self.num_kv_heads, self.head_dim
        g = H // Hkv                                                # query heads per kv head
        if not 1 <= T <= self.max_len:
            raise ValueError(f"sequence length T = {T} must lie in 1 .. max_len = {self.max_len}")
        assert d == H * hd, "x's last dimension must be d_model"

        q = self.W_query(x).view(B, T, H, hd).transpose(1, 2)      # (B, H, T, hd)
        k = self.W_key(x).view(B, T, Hkv, hd).transpose(1, 2)      # (B, Hkv, T, hd)
        v = self.W_value(x).view(B, T, Hkv, hd).transpose(1, 2)    # (B, Hkv, T, hd)
        if self.use_rope:                                           # rotate q and k at positions 0 .. T-1, never v
            q = apply_rope(q, self.rope_cos, self.rope_sin)
            k = apply_rope(k, self.rope_cos, self.rope_sin)
        assert q.shape == (B, H, T, hd) and k.shape == v.shape == (B, Hkv, T, hd)

        # query head h = j * g + r reads kv head j = h // g: split the head axis as (j, r)
        qg = q.unflatten(1, (Hkv, g))                               # (B, Hkv, g, T, hd)
        # s[b, j, r, t, u] = <q_{b, jg+r, t}, k_{b, j, u}> / sqrt(hd)
        scores = torch.einsum("bjrtd,bjud->bjrtu", qg, k) / math.sqrt(hd)  # (B, Hkv, g, T, T)
        t_pos = torch.arange(T, device=x.device)
        causal = t_pos[None, :] <= t_pos[:, None]                   # (T, T): key u <= query t, True = may attend
        scores = torch.where(causal, scores, float("-inf"))
        weights = torch.softmax(scores, dim=-1)                     # (B, Hkv, g, T, T), rows sum to 1
        assert bool(torch.isfinite(weights).all()), "every query sees at least itself: weights are finite"
        weights = self.dropout(weights)
        # c[b, j, r, t] = sum_u w[b, j, r, t, u] v[b, j, u]
        context = torch.einsum("bjrtu,bjud->bjrtd", weights, v)     # (B, Hkv, g, T, hd)
        context = context.flatten(1, 2)                             # (B, H, T, hd), head h = j * g + r
        merged = context.transpose(1, 2).reshape(B, T, H * hd)      # (B, T, d_model)
        out = self.out_proj(merged)                                 # (B, T, d_model)
        assert out.shape == (B, T, d)
        return out
