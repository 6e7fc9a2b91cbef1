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
        if num_heads < 1 or num_kv_heads < 1:
            raise ValueError(f"num_heads and num_kv_heads must be >= 1, got {num_heads} and {num_kv_heads}")
        if d_model % num_heads != 0:
            raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
        if num_heads % num_kv_heads != 0:
            raise ValueError(f"num_kv_heads ({num_kv_heads}) must divide num_heads ({num_heads})")
        if max_len < 1:
            raise ValueError(f"max_len must be >= 1, got {max_len}")
        self.d_model = d_model
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = d_model // num_heads
        self.max_len = max_len
        self.use_rope = bool(rope)

        kv_dim = num_kv_heads * self.head_dim
        self.W_query = nn.Linear(d_model, d_model, bias=bias)
        self.W_key = nn.Linear(d_model, kv_dim, bias=bias)
        self.W_value = nn.Linear(d_model, kv_dim, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
        if self.use_rope:
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
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must be (B, T, {self.d_model}), got shape {tuple(x.shape)}")
        B, T, _ = x.shape
        if not 1 <= T <= self.max_len:
            raise ValueError(f"sequence length {T} must be between 1 and max_len = {self.max_len}")
        H, Hkv, hd = self.num_heads, self.num_kv_heads, self.head_dim

        q = self.W_query(x).view(B, T, H, hd).transpose(1, 2)       # (B, H, T, hd)
        k = self.W_key(x).view(B, T, Hkv, hd).transpose(1, 2)       # (B, Hkv, T, hd)
        v = self.W_value(x).view(B, T, Hkv, hd).transpose(1, 2)     # (B, Hkv, T, hd)
        if self.use_rope:  # queries and keys only, positions 0 .. T-1
            q = apply_rope(q, self.rope_cos, self.rope_sin)
            k = apply_rope(k, self.rope_cos, self.rope_sin)

        # half inputs: scores, softmax and the weighted sum in float32, cast back once
        compute = torch.promote_types(q.dtype, torch.float32)
        k = _group_heads(k.to(compute), H)                          # (B, H, T, hd)
        v = _group_heads(v.to(compute), H)                          # (B, H, T, hd)

        scores = torch.matmul(q.to(compute), k.transpose(-2, -1))  # (B, H, T, T), my own buffer from here on
        scores.mul_(1.0 / math.sqrt(hd))
        rows = torch.arange(T, device=x.device)
        ahead = rows[None, :] - rows[:, None] > 0                   # key j after query i: masked (True = hidden)
        scores.masked_fill_(ahead, float("-inf"))
        weights = self.dropout(_softmax_(scores))

        context = torch.matmul(weights, v)                          # (B, H, T, hd)
        merged = context.transpose(1, 2).reshape(B, T, self.d_model).to(q.dtype)
        return self.out_proj(merged)


def _group_heads(t: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(B, Hkv, T, hd) -> (B, num_heads, T, hd): query head h reads kv head h // g (g = num_heads // Hkv), as
    repeat_interleave(g, dim=1) would, by expanding a new group axis and folding it into the heads."""
    B, Hkv, T, hd = t.shape
    g = num_heads // Hkv
    if g == 1:
        return t
    return t[:, :, None].expand(B, Hkv, g, T, hd).reshape(B, Hkv * g, T, hd)


def _softmax_(scores: torch.Tensor) -> torch.Tensor:
    """Numerically stable softmax over the last dim, in place on my own scores buffer (every row sees a key).
    Returns the weights: the same buffer, or a new tensor when autograd needs exp's output."""
    # the row max is a constant shift (softmax does not depend on it), so it needs no gradient of its own
    scores.sub_(scores.amax(dim=-1, keepdim=True).detach()).exp_()
    denom = scores.sum(dim=-1, keepdim=True)
    if scores.requires_grad:  # autograd keeps exp's output for the backward: divide out of place then
        return scores / denom
    return scores.div_(denom)
