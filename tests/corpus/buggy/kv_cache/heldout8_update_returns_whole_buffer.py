"""Bug: KVCache.update returns the whole preallocated (max_len) buffers instead of the filled prefix, so decode_step attends over the unwritten zero slots too (exp(0) = 1 weight each) and its bottom-right mask is aligned to max_len, not to the real length.

Misconception: cache-unwritten-slots
Held out: yes
Source: classic learner slip (returning the preallocated cache instead of cache[:, :, :length]); written from scratch
"""

import math

import torch
from torch import nn

from .grouped_query_attention import GroupedQueryAttention
from .rope import apply_rope


class KVCache(nn.Module):
    """Preallocated key/value storage."""

    def __init__(self, batch_size: int, num_kv_heads: int, max_len: int, head_dim: int,
                 dtype: torch.dtype = torch.float32, device=None) -> None:
        super().__init__()
        self.max_len = max_len
        self.length = 0
        shape = (batch_size, num_kv_heads, max_len, head_dim)
        self.register_buffer("k_cache", torch.zeros(shape, dtype=dtype, device=device))
        self.register_buffer("v_cache", torch.zeros(shape, dtype=dtype, device=device))

    def update(self, k: torch.Tensor, v: torch.Tensor):
        t = k.size(2)
        if self.length + t > self.max_len:
            raise ValueError(f"cannot add {t} tokens: {self.length} of {self.max_len} used")
        self.k_cache[:, :, self.length:self.length + t].copy_(k)
        self.v_cache[:, :, self.length:self.length + t].copy_(v)
        self.length += t
        return self.k_cache, self.v_cache

    def reset(self) -> None:
        self.length = 0
        self.k_cache.zero_()
        self.v_cache.zero_()


def decode_step(model: GroupedQueryAttention, cache: KVCache, x: torch.Tensor) -> torch.Tensor:
    B, t, d_model = x.shape
    H, Hkv, hd = model.num_heads, model.num_kv_heads, model.head_dim
    P = cache.length
    q = model.W_query(x).view(B, t, H, hd).transpose(1, 2)
    k = model.W_key(x).view(B, t, Hkv, hd).transpose(1, 2)
    v = model.W_value(x).view(B, t, Hkv, hd).transpose(1, 2)
    if model.use_rope:
        pos = torch.arange(P, P + t, device=x.device)
        q = apply_rope(q, model.rope_cos, model.rope_sin, pos)
        k = apply_rope(k, model.rope_cos, model.rope_sin, pos)
    k_all, v_all = cache.update(k, v)
    S = k_all.shape[-2]
    g = H // Hkv
    k_all = k_all.to(q.dtype).repeat_interleave(g, dim=1)
    v_all = v_all.to(q.dtype).repeat_interleave(g, dim=1)
    scores = torch.matmul(q, k_all.transpose(-2, -1)) / math.sqrt(hd)
    mask = torch.ones(t, S, dtype=torch.bool, device=x.device).tril(diagonal=S - t)
    scores = scores.masked_fill(~mask, float("-inf"))
    w = model.dropout(torch.softmax(scores, dim=-1))
    ctx = torch.matmul(w, v_all).transpose(1, 2).reshape(B, t, d_model)
    return model.out_proj(ctx)


def decode(model: GroupedQueryAttention, cache: KVCache, x: torch.Tensor, chunk_size: int = 1) -> torch.Tensor:
    if chunk_size < 1:
        raise ValueError("chunk_size must be >= 1")
    pieces = [decode_step(model, cache, x[:, s:s + chunk_size]) for s in range(0, x.shape[1], chunk_size)]
    return torch.cat(pieces, dim=1)
