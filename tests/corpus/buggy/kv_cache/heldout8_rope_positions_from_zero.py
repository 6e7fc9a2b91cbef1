"""Bug: decode_step rotates the new queries and keys with apply_rope(...) and no positions, i.e. at positions 0 .. t-1 of the chunk, instead of the absolute positions P .. P+t-1, so every token after the first chunk gets the wrong rotation (RoPE models only).

Misconception: positions-not-offset
Held out: yes
Source: https://github.com/rajveer43/VeloxQuant-MLX/issues/389 (cache offset not tracking the true absolute position corrupts the RoPE rotation of every later token); written from scratch
"""

import math

import torch
from torch import nn

from .grouped_query_attention import GroupedQueryAttention
from .rope import apply_rope


class KVCache(nn.Module):
    def __init__(self, batch_size, num_kv_heads, max_len, head_dim, dtype=torch.float32, device=None):
        super().__init__()
        self.max_len = max_len
        self.length = 0
        self.register_buffer("k_cache", torch.zeros(batch_size, num_kv_heads, max_len, head_dim, dtype=dtype,
                                                    device=device))
        self.register_buffer("v_cache", torch.zeros(batch_size, num_kv_heads, max_len, head_dim, dtype=dtype,
                                                    device=device))

    def update(self, k, v):
        n = k.shape[2]
        if self.length + n > self.max_len:
            raise ValueError("KV cache is full")
        self.k_cache[:, :, self.length:self.length + n] = k
        self.v_cache[:, :, self.length:self.length + n] = v
        self.length += n
        return self.k_cache[:, :, :self.length], self.v_cache[:, :, :self.length]

    def reset(self):
        self.length = 0
        self.k_cache.zero_()
        self.v_cache.zero_()


def decode_step(model, cache, x):
    B, t, D = x.shape
    H, Hkv, hd = model.num_heads, model.num_kv_heads, model.head_dim
    q = model.W_query(x).view(B, t, H, hd).transpose(1, 2)
    k = model.W_key(x).view(B, t, Hkv, hd).transpose(1, 2)
    v = model.W_value(x).view(B, t, Hkv, hd).transpose(1, 2)
    if model.use_rope:
        q = apply_rope(q, model.rope_cos, model.rope_sin)
        k = apply_rope(k, model.rope_cos, model.rope_sin)
    keys, values = cache.update(k, v)
    S = keys.shape[2]
    keys = keys.to(q.dtype).repeat_interleave(H // Hkv, dim=1)
    values = values.to(q.dtype).repeat_interleave(H // Hkv, dim=1)
    att = q @ keys.transpose(2, 3) / math.sqrt(hd)
    keep = torch.ones(t, S, dtype=torch.bool, device=x.device).tril(diagonal=S - t)
    att = torch.softmax(att.masked_fill(~keep, float("-inf")), dim=-1)
    att = model.dropout(att)
    out = (att @ values).transpose(1, 2).reshape(B, t, D)
    return model.out_proj(out)


def decode(model, cache, x, chunk_size=1):
    if chunk_size < 1:
        raise ValueError("chunk_size must be >= 1")
    outs = []
    for i in range(0, x.shape[1], chunk_size):
        outs.append(decode_step(model, cache, x[:, i:i + chunk_size]))
    return torch.cat(outs, dim=1)
