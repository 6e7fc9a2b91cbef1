"""Bug: RollingKVCache.forward writes the chunk into the cache first and then attends over what the cache holds, so with chunks of t > 1 the oldest keys the chunk's first queries still need have already been overwritten; token-by-token decoding is right.

Misconception: cache-write-before-attend
Held out: yes
Source: https://github.com/ollama/ollama/pull/15591 (RotatingKVCache dropped the older-but-still-in-window tokens the first query of an L > 1 update needs); written from scratch
"""

import math

import torch
from torch import nn


def sliding_window_mask(seq_len, window, device=None, kv_len=None):
    if window < 1:
        raise ValueError("window must be >= 1")
    if kv_len is None:
        kv_len = seq_len
    i = torch.arange(kv_len - seq_len, kv_len, device=device).view(-1, 1)
    j = torch.arange(kv_len, device=device).view(1, -1)
    return (j <= i) & (j > i - window)


def banded_attention(query, key, value, window, block_size=64):
    assert block_size >= 1, "block_size must be a positive integer"
    if window < 1:
        raise ValueError("window must be >= 1")
    T = query.shape[-2]
    work = torch.float32 if query.dtype in (torch.float16, torch.bfloat16) else query.dtype
    scale = query.shape[-1] ** -0.5
    outs = []
    for s in range(0, T, block_size):
        e = min(T, s + block_size)
        k0 = max(0, s - window + 1)
        q = query[..., s:e, :].to(work)
        k = key[..., k0:e, :].to(work)
        v = value[..., k0:e, :].to(work)
        att = q @ k.transpose(-1, -2) * scale
        m = sliding_window_mask(e - s, window, device=query.device, kv_len=e - k0)
        att = att.masked_fill(~m, float("-inf")).softmax(dim=-1)
        outs.append(att @ v)
    return torch.cat(outs, dim=-2).to(query.dtype)


class RollingKVCache(nn.Module):
    def __init__(self, batch_size, num_heads, window, head_dim, dtype=torch.float32, device=None):
        super().__init__()
        if window < 1:
            raise ValueError("window must be >= 1")
        self.window = window
        self.register_buffer("k_cache", torch.zeros(batch_size, num_heads, window, head_dim, dtype=dtype, device=device))
        self.register_buffer("v_cache", torch.zeros(batch_size, num_heads, window, head_dim, dtype=dtype, device=device))
        self.count = 0

    def held(self):
        n = min(self.count, self.window)
        idx = torch.arange(self.count - n, self.count, device=self.k_cache.device) % self.window
        return self.k_cache[:, :, idx], self.v_cache[:, :, idx]

    def update(self, k, v):
        t = k.shape[-2]
        for i in range(max(0, t - self.window), t):
            slot = (self.count + i) % self.window
            self.k_cache[:, :, slot] = k[:, :, i].to(self.k_cache.dtype)
            self.v_cache[:, :, slot] = v[:, :, i].to(self.v_cache.dtype)
        self.count += t
        return self.held()

    def forward(self, q, k, v):
        t = q.shape[-2]
        keys, values = self.update(k, v)  # cache now holds the chunk too
        n = keys.shape[-2]
        work = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype
        att = q.to(work) @ keys.to(work).transpose(-1, -2) / math.sqrt(q.shape[-1])
        m = sliding_window_mask(t, self.window, device=q.device, kv_len=n)
        att = att.masked_fill(~m, float("-inf")).softmax(dim=-1)
        return (att @ values.to(work)).to(q.dtype)

    def reset(self):
        self.k_cache.zero_()
        self.v_cache.zero_()
        self.count = 0
