"""Bug: banded_attention starts the key band at start - window + 1 without clamping at 0, so early blocks slice keys from the END of the sequence (negative index).

Misconception: band-range
Held out: yes
Source: https://github.com/huggingface/transformers/issues/39408 (off-by-one/edge handling of the sliding-window bounds); written from scratch
"""

from __future__ import annotations

import math

import torch
from torch import nn


def sliding_window_mask(seq_len: int, window: int, device: torch.device | str | None = None,
                        kv_len: int | None = None) -> torch.Tensor:
    """Boolean (L, S) sliding-window causal mask, bottom-right aligned."""
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    S = seq_len if kv_len is None else kv_len
    full = torch.ones(seq_len, S, dtype=torch.bool, device=device)
    return full.tril(diagonal=S - seq_len) & ~full.tril(diagonal=S - seq_len - window)


def banded_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, window: int,
                     block_size: int = 64) -> torch.Tensor:
    """Causal sliding-window attention, block of queries by block."""
    assert block_size >= 1, "block_size must be a positive integer"
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    T = query.shape[-2]
    work = torch.float32 if query.dtype in (torch.float16, torch.bfloat16) else query.dtype
    outs = []
    for s0 in range(0, T, block_size):
        s1 = min(T, s0 + block_size)
        k0 = s0 - window + 1  # first key the block's first query can see
        q = query[..., s0:s1, :].to(work)
        k = key[..., k0:s1, :].to(work)
        v = value[..., k0:s1, :].to(work)
        sc = q @ k.transpose(-2, -1) / math.sqrt(query.shape[-1])
        keep = sliding_window_mask(s1 - s0, window, device=query.device, kv_len=k.shape[-2])
        outs.append(torch.softmax(sc.masked_fill(~keep, float("-inf")), dim=-1) @ v)
    return torch.cat(outs, dim=-2).to(query.dtype)


class RollingKVCache(nn.Module):
    """Keeps the last `window` keys and values (rolled, oldest first)."""

    def __init__(self, batch_size: int, num_heads: int, window: int, head_dim: int,
                 dtype: torch.dtype = torch.float32, device: torch.device | str | None = None) -> None:
        super().__init__()
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        self.window = window
        self.register_buffer("k_cache", torch.zeros(batch_size, num_heads, window, head_dim, dtype=dtype,
                                                    device=device))
        self.register_buffer("v_cache", torch.zeros(batch_size, num_heads, window, head_dim, dtype=dtype,
                                                    device=device))
        self.n = 0

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        keys = torch.cat([self.k_cache[..., self.window - self.n:, :], k.to(self.k_cache.dtype)], dim=-2)
        vals = torch.cat([self.v_cache[..., self.window - self.n:, :], v.to(self.v_cache.dtype)], dim=-2)
        keys, vals = keys[..., -self.window:, :], vals[..., -self.window:, :]
        self.n = keys.shape[-2]
        self.k_cache[..., self.window - self.n:, :] = keys
        self.v_cache[..., self.window - self.n:, :] = vals
        return self.held()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        old_k, old_v = self.held()
        keys = torch.cat([old_k, k.to(old_k.dtype)], dim=-2)
        vals = torch.cat([old_v, v.to(old_v.dtype)], dim=-2)
        work = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype
        sc = q.to(work) @ keys.to(work).transpose(-2, -1) / math.sqrt(q.shape[-1])
        keep = sliding_window_mask(q.shape[-2], self.window, device=q.device, kv_len=keys.shape[-2])
        out = torch.softmax(sc.masked_fill(~keep, float("-inf")), dim=-1) @ vals.to(work)
        self.update(k, v)
        return out.to(q.dtype)

    def reset(self) -> None:
        self.k_cache.zero_()
        self.v_cache.zero_()
        self.n = 0

    def held(self) -> tuple[torch.Tensor, torch.Tensor]:
        start = self.window - self.n
        return self.k_cache[..., start:, :].clone(), self.v_cache[..., start:, :].clone()
