"""Bug: KVCache.update refuses a write when length + t >= max_len instead of > max_len, so filling the cache exactly to max_len raises ValueError.

Misconception: cache-off-by-one
Held out: yes
Source: classic learner slip (off-by-one bound check); from the reference
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .grouped_query_attention import GroupedQueryAttention  # the model decode_step runs through (keep this import)
from .rope import apply_rope


class KVCache(nn.Module):
    """Preallocated key and value storage for decoding.

    Args:
        batch_size, num_kv_heads, max_len, head_dim: the buffers are (batch_size, num_kv_heads, max_len, head_dim).
        dtype, device: of the buffers.

    Attributes the grader relies on:
        k_cache, v_cache: the two buffers, registered with `register_buffer`, allocated once here at full size.
        length: an int, the number of positions filled (0 after construction and after `reset`).
        max_len: an int.
    """

    def __init__(self, batch_size: int, num_kv_heads: int, max_len: int, head_dim: int,
                 dtype: torch.dtype = torch.float32, device: torch.device | str | None = None) -> None:
        super().__init__()
        shape = (batch_size, num_kv_heads, max_len, head_dim)
        self.register_buffer("k_cache", torch.zeros(shape, dtype=dtype, device=device))
        self.register_buffer("v_cache", torch.zeros(shape, dtype=dtype, device=device))
        self.max_len = max_len
        self.length = 0  # positions 0 .. length - 1 hold valid keys and values

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write t new positions (k and v each (batch_size, num_kv_heads, t, head_dim)) after the filled ones.

        Returns:
            (k_all, v_all): positions 0 .. length - 1 after the write, each (batch_size, num_kv_heads, length,
            head_dim), in the cache's dtype. Never the unwritten slots beyond `length`.

        Raises:
            ValueError: when length + t > max_len (nothing is written then).
        """
        t = k.shape[-2]
        end = self.length + t
        if end >= self.max_len:
            raise ValueError(f"KV cache overflow: {self.length} cached + {t} new positions exceed max_len "
                             f"{self.max_len}")
        self.k_cache[:, :, self.length:end] = k  # copies (and casts) into the preallocated storage
        self.v_cache[:, :, self.length:end] = v
        self.length = end
        return self.k_cache[:, :, :end], self.v_cache[:, :, :end]

    def reset(self) -> None:
        """Forget every position: the next update starts a new sequence at position 0."""
        self.length = 0
        self.k_cache.zero_()  # not needed for correctness (only the filled prefix is ever read): hygiene
        self.v_cache.zero_()


def decode_step(model: GroupedQueryAttention, cache: KVCache, x: torch.Tensor) -> torch.Tensor:
    """One chunk of new tokens x (B, t, d_model) through `model`, with `cache` holding the earlier ones.

    Returns:
        (B, t, d_model): the rows of the model's full causal forward for these t positions. The cache then holds
        them too.
    """
    # q: (B, t, d_model) -> (B, H, t, hd); k, v: (B, t, Hkv * hd) -> (B, Hkv, t, hd); k_all, v_all: (B, Hkv, S, hd)
    # grouped: (B, H, S, hd); scores, weights: (B, H, t, S); context: (B, H, t, hd) -> (B, t, d_model)
    B, t, d_model = x.shape
    H, Hkv, hd = model.num_heads, model.num_kv_heads, model.head_dim
    start = cache.length  # the chunk's first absolute position
    q = model.W_query(x).view(B, t, H, hd).transpose(1, 2)
    k = model.W_key(x).view(B, t, Hkv, hd).transpose(1, 2)
    v = model.W_value(x).view(B, t, Hkv, hd).transpose(1, 2)
    if model.use_rope:
        positions = torch.arange(start, start + t, device=x.device)  # absolute, not 0 .. t-1
        q = apply_rope(q, model.rope_cos, model.rope_sin, positions)
        k = apply_rope(k, model.rope_cos, model.rope_sin, positions)

    k_all, v_all = cache.update(k, v)  # (B, Hkv, S, hd): the cached prefix and this chunk
    S = k_all.shape[-2]
    k_all = k_all.to(q.dtype).repeat_interleave(H // Hkv, dim=1)  # (B, H, S, hd)
    v_all = v_all.to(q.dtype).repeat_interleave(H // Hkv, dim=1)
    scores = q @ k_all.transpose(-2, -1) / math.sqrt(hd)  # (B, H, t, S)
    allowed = torch.ones(t, S, dtype=torch.bool, device=x.device).tril(diagonal=S - t)  # bottom-right aligned
    weights = model.dropout(torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1))
    context = (weights @ v_all).transpose(1, 2).reshape(B, t, d_model)
    return model.out_proj(context)


def decode(model: GroupedQueryAttention, cache: KVCache, x: torch.Tensor, chunk_size: int = 1) -> torch.Tensor:
    """Decode x (B, T, d_model) in chunks of `chunk_size` (>= 1, else ValueError) through `decode_step`.

    Returns:
        (B, T, d_model): from an empty cache, the model's full causal forward of x; after earlier calls, the
        continuation of the cached sequences.
    """
    # chunks x[:, i:i + chunk_size]: (B, t, d_model) each -> outputs (B, t, d_model) -> cat on dim 1: (B, T, d_model)
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    starts = range(0, x.shape[1], chunk_size)  # the last chunk may be shorter
    outs = [decode_step(model, cache, x[:, i:i + chunk_size]) for i in starts]
    return torch.cat(outs, dim=1)  # (B, T, d_model)
