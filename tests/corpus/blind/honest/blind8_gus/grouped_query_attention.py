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
        # ---- argument checks ----
        if d_model <= 0 or num_heads <= 0 or num_kv_heads <= 0:
            raise ValueError("d_model, num_heads and num_kv_heads must all be positive")
        if d_model % num_heads != 0:
            raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
        if num_heads % num_kv_heads != 0:
            raise ValueError(f"num_kv_heads ({num_kv_heads}) must divide num_heads ({num_heads})")
        if max_len < 1:
            raise ValueError(f"max_len must be at least 1, got {max_len}")

        # ---- sizes ----
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = d_model // num_heads
        self.group_size = num_heads // num_kv_heads      # query heads per key/value head
        self.max_len = max_len
        self.use_rope = rope
        kv_width = num_kv_heads * self.head_dim

        # ---- layers ----
        self.W_query = nn.Linear(d_model, d_model, bias=bias)
        self.W_key = nn.Linear(d_model, kv_width, bias=bias)
        self.W_value = nn.Linear(d_model, kv_width, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

        # ---- RoPE tables, as buffers so that .to() moves them ----
        if rope:
            cos_table, sin_table = rope_frequencies(self.head_dim, max_len, rope_base)
            self.register_buffer("rope_cos", cos_table)
            self.register_buffer("rope_sin", sin_table)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Causal grouped-query self-attention over `x` (B, T, d_model), 1 <= T <= max_len.

        Returns:
            (B, T, d_model).
        """
        # q: (B, T, d_model) -> (B, T, H, hd) -> (B, H, T, hd); k, v: (B, T, Hkv * hd) -> (B, Hkv, T, hd)
        # grouped k, v: (B, H, T, hd); scores, weights: (B, H, T, T); context: (B, H, T, hd) -> (B, T, d_model)
        if x.dim() != 3:
            raise ValueError(f"x must be (B, T, d_model), got shape {tuple(x.shape)}")
        batch, seq_len, d_model = x.shape
        if seq_len < 1 or seq_len > self.max_len:
            raise ValueError(f"sequence length {seq_len} must be between 1 and max_len = {self.max_len}")

        H = self.num_heads
        H_kv = self.num_kv_heads
        hd = self.head_dim
        group = H // H_kv

        # 1. project and split into heads
        queries = self.W_query(x)                                  # (B, T, d_model)
        keys = self.W_key(x)                                       # (B, T, H_kv * hd)
        values = self.W_value(x)                                   # (B, T, H_kv * hd)

        queries = queries.view(batch, seq_len, H, hd).transpose(1, 2)    # (B, H, T, hd)
        keys = keys.view(batch, seq_len, H_kv, hd).transpose(1, 2)       # (B, H_kv, T, hd)
        values = values.view(batch, seq_len, H_kv, hd).transpose(1, 2)   # (B, H_kv, T, hd)

        # 2. rotary embeddings on queries and keys (never on values)
        if self.use_rope:
            queries = apply_rope(queries, self.rope_cos, self.rope_sin)
            keys = apply_rope(keys, self.rope_cos, self.rope_sin)

        # 3. causal mask: query i may look at keys 0..i
        causal = torch.tril(torch.ones(seq_len, seq_len, dtype=torch.bool, device=x.device))

        # scores and softmax in float32 at least (half inputs)
        compute_dtype = torch.promote_types(queries.dtype, torch.float32)
        scale = 1.0 / math.sqrt(hd)

        # 4. attention, one query head at a time; query head h reads key/value head h // group
        head_outputs = []
        for h in range(H):
            kv_head = h // group
            q_h = queries[:, h].to(compute_dtype)                  # (B, T, hd)
            k_h = keys[:, kv_head].to(compute_dtype)               # (B, T, hd)
            v_h = values[:, kv_head].to(compute_dtype)             # (B, T, hd)

            scores = (q_h @ k_h.transpose(-2, -1)) * scale         # (B, T, T)
            scores = scores.masked_fill(~causal, float("-inf"))
            weights = torch.softmax(scores, dim=-1)                # subtracts the row max: stable
            weights = self.dropout(weights)
            head_outputs.append(weights @ v_h)                     # (B, T, hd)

        context = torch.stack(head_outputs, dim=1)                 # (B, H, T, hd)
        assert context.shape == (batch, H, seq_len, hd)
        context = context.to(queries.dtype)

        # 5. merge the heads and project
        merged = context.transpose(1, 2).reshape(batch, seq_len, H * hd)
        return self.out_proj(merged)
