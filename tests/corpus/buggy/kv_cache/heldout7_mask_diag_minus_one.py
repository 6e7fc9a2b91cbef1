"""Bug: decode_step's bottom-right mask uses tril(diagonal=S - t - 1), so each new token cannot see its own key (the first token of a sequence sees nothing: NaN).

Misconception: mask-diagonal
Held out: yes
Source: https://github.com/tinygrad/tinygrad/pull/2425 (causal mask off by one on the diagonal); written from scratch
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .grouped_query_attention import GroupedQueryAttention
from .rope import apply_rope


class KVCache(nn.Module):
    """Preallocated key and value storage for decoding."""

    def __init__(self, batch_size: int, num_kv_heads: int, max_len: int, head_dim: int,
                 dtype: torch.dtype = torch.float32, device: torch.device | str | None = None) -> None:
        super().__init__()
        self.max_len = max_len
        self.length = 0
        self.register_buffer("k_cache", torch.zeros(batch_size, num_kv_heads, max_len, head_dim, dtype=dtype,
                                                    device=device))
        self.register_buffer("v_cache", torch.zeros(batch_size, num_kv_heads, max_len, head_dim, dtype=dtype,
                                                    device=device))

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        t = k.size(2)
        if self.length + t > self.max_len:
            raise ValueError("KV cache overflow")
        pos = self.length
        self.k_cache[:, :, pos:pos + t].copy_(k)
        self.v_cache[:, :, pos:pos + t].copy_(v)
        self.length = pos + t
        return self.k_cache[:, :, :self.length], self.v_cache[:, :, :self.length]

    def reset(self) -> None:
        self.length = 0
        self.k_cache.zero_()
        self.v_cache.zero_()


def decode_step(model: GroupedQueryAttention, cache: KVCache, x: torch.Tensor) -> torch.Tensor:
    """One chunk of new tokens through the model, using and extending the cache."""
    b, t, d = x.shape
    nh, nkv, hd = model.num_heads, model.num_kv_heads, model.head_dim
    past = cache.length
    q = model.W_query(x).view(b, t, nh, hd).transpose(1, 2)
    k = model.W_key(x).view(b, t, nkv, hd).transpose(1, 2)
    v = model.W_value(x).view(b, t, nkv, hd).transpose(1, 2)
    if model.use_rope:
        pos = torch.arange(past, past + t, device=x.device)
        q = apply_rope(q, model.rope_cos, model.rope_sin, pos)
        k = apply_rope(k, model.rope_cos, model.rope_sin, pos)
    keys, values = cache.update(k, v)
    keys = keys.to(q.dtype).repeat_interleave(nh // nkv, dim=1)
    values = values.to(q.dtype).repeat_interleave(nh // nkv, dim=1)
    S = keys.shape[2]
    scores = q @ keys.transpose(2, 3) / math.sqrt(hd)
    visible = torch.ones(t, S, dtype=torch.bool, device=x.device).tril(diagonal=S - t - 1)
    probs = model.dropout(torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1))
    out = (probs @ values).transpose(1, 2).reshape(b, t, d)
    return model.out_proj(out)


def decode(model: GroupedQueryAttention, cache: KVCache, x: torch.Tensor, chunk_size: int = 1) -> torch.Tensor:
    """Feed x through decode_step chunk by chunk."""
    if chunk_size < 1:
        raise ValueError("chunk_size must be >= 1")
    pieces = []
    for i in range(0, x.size(1), chunk_size):
        pieces.append(decode_step(model, cache, x[:, i:i + chunk_size]))
    return torch.cat(pieces, dim=1)
