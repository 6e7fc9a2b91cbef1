# Generated from solutions/kv_cache.py by `grader build`. Your task: replace each
# `raise NotImplementedError(...)` with working code. Keep the names and signatures.
"""Exercise `kv_cache`: decode through a GroupedQueryAttention one token (or one chunk) at a time with a KV cache.

A language model generates token by token. Recomputing attention over the whole prefix at every step projects
every past token's key and value again: O(T^2) work for T tokens. A KV cache keeps each token's keys and values
(after RoPE) once they are computed, so a step projects only its NEW tokens and attends over the cached ones.

1. `KVCache` preallocates (batch_size, num_kv_heads, max_len, head_dim) buffers for keys and for values and
   keeps how many positions are filled (`length`). `update(k, v)` writes t new positions after the filled ones
   and returns the filled prefix; writing beyond max_len is refused with a ValueError (and writes nothing).
   With GQA the cache holds num_kv_heads heads, not num_heads: that is the memory GQA saves.

2. `decode_step(model, cache, x)` runs a chunk x (B, t, d_model) of NEW tokens through the model's layers,
   given a cache already holding P = cache.length tokens of the same sequences:
       q, k, v = the model's projections of x only, split into heads (q: H heads, k and v: num_kv_heads)
       with model.use_rope: rotate q and k with `apply_rope(..., positions=P .. P + t - 1)` (absolute positions,
       not 0 .. t-1), never v
       k_all, v_all = cache.update(k, v)            # (B, Hkv, S, hd), S = P + t
       attend q over k_all, v_all (grouped as in GQA: repeat_interleave), scaled by 1/sqrt(head_dim), with a
       BOTTOM-RIGHT aligned causal mask: new token i sits at position P + i and sees keys 0 .. P + i, i.e.
       torch.ones(t, S, dtype=torch.bool).tril(diagonal=S - t); then model.dropout, heads merged, model.out_proj.
   Use only these attributes of `model`: W_query, W_key, W_value, out_proj, dropout, num_heads, num_kv_heads,
   head_dim, use_rope, rope_cos, rope_sin (never model(x): that would recompute the whole prefix).

3. `decode(model, cache, x, chunk_size=1)` feeds x (B, T, d_model) through `decode_step` in chunks of chunk_size
   (the last may be shorter) and concatenates the outputs. Starting from an empty cache, the result equals the
   model's full causal forward `model(x)`, to rounding, whatever chunk_size is; a later call continues the
   same sequences (positions P .. P + T - 1).

Never build a (T, T) or (max_len, max_len) tensor while decoding: a step's largest intermediate is (B, H, t, S).
F.scaled_dot_product_attention and nn.MultiheadAttention are banned in this exercise.
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
        if batch_size < 1 or num_kv_heads < 1 or max_len < 1 or head_dim < 1:
            raise ValueError("every size of a KVCache must be at least 1")
        self.batch_size = batch_size
        self.num_kv_heads = num_kv_heads
        self.max_len = max_len
        self.head_dim = head_dim
        self.length = 0    # how many positions are filled

        # allocate both buffers once, at full size
        full_shape = (batch_size, num_kv_heads, max_len, head_dim)
        self.register_buffer("k_cache", torch.zeros(full_shape, dtype=dtype, device=device))
        self.register_buffer("v_cache", torch.zeros(full_shape, dtype=dtype, device=device))

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write t new positions (k and v each (batch_size, num_kv_heads, t, head_dim)) after the filled ones.

        Returns:
            (k_all, v_all): positions 0 .. length - 1 after the write, each (batch_size, num_kv_heads, length,
            head_dim), in the cache's dtype. Never the unwritten slots beyond `length`.

        Raises:
            ValueError: when length + t > max_len (nothing is written then).
        """
        if k.shape != v.shape:
            raise ValueError(f"k and v must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}")
        if k.dim() != 4:
            raise ValueError(f"k must be (batch_size, num_kv_heads, t, head_dim), got {tuple(k.shape)}")
        batch, heads, new_tokens, dim = k.shape
        if (batch, heads, dim) != (self.batch_size, self.num_kv_heads, self.head_dim):
            raise ValueError(f"k of shape {tuple(k.shape)} does not fit a cache of "
                             f"({self.batch_size}, {self.num_kv_heads}, max_len, {self.head_dim})")

        start = self.length
        stop = start + new_tokens
        # check BEFORE writing anything
        if stop > self.max_len:
            raise ValueError(f"KV cache overflow: {start} filled + {new_tokens} new > max_len {self.max_len}")

        # write the new positions right after the filled ones (cast to the cache's dtype)
        self.k_cache[:, :, start:stop] = k.to(self.k_cache.dtype)
        self.v_cache[:, :, start:stop] = v.to(self.v_cache.dtype)
        self.length = stop

        # only the filled prefix, never the unwritten slots
        k_all = self.k_cache[:, :, :stop]
        v_all = self.v_cache[:, :, :stop]
        return k_all, v_all

    def reset(self) -> None:
        """Forget every position: the next update starts a new sequence at position 0."""
        self.length = 0
        # not strictly needed (only the filled prefix is ever read), but keeps the buffers clean
        self.k_cache.zero_()
        self.v_cache.zero_()


def decode_step(model: GroupedQueryAttention, cache: KVCache, x: torch.Tensor) -> torch.Tensor:
    """One chunk of new tokens x (B, t, d_model) through `model`, with `cache` holding the earlier ones.

    Returns:
        (B, t, d_model): the rows of the model's full causal forward for these t positions. The cache then holds
        them too.
    """
    # q: (B, t, d_model) -> (B, H, t, hd); k, v: (B, t, Hkv * hd) -> (B, Hkv, t, hd); k_all, v_all: (B, Hkv, S, hd)
    # grouped: (B, H, S, hd); scores, weights: (B, H, t, S); context: (B, H, t, hd) -> (B, t, d_model)
    batch, new_tokens, d_model = x.shape
    H = model.num_heads
    H_kv = model.num_kv_heads
    hd = model.head_dim
    group = H // H_kv
    past = cache.length                      # P: tokens already in the cache

    # 1. project ONLY the new tokens
    q = model.W_query(x).view(batch, new_tokens, H, hd).transpose(1, 2)         # (B, H, t, hd)
    k = model.W_key(x).view(batch, new_tokens, H_kv, hd).transpose(1, 2)       # (B, H_kv, t, hd)
    v = model.W_value(x).view(batch, new_tokens, H_kv, hd).transpose(1, 2)     # (B, H_kv, t, hd)

    # 2. RoPE at the absolute positions P .. P + t - 1 (queries and keys only)
    if model.use_rope:
        positions = torch.arange(past, past + new_tokens, device=x.device)
        q = apply_rope(q, model.rope_cos, model.rope_sin, positions)
        k = apply_rope(k, model.rope_cos, model.rope_sin, positions)

    # 3. store the new keys/values, get everything seen so far
    k_all, v_all = cache.update(k, v)        # (B, H_kv, S, hd)
    total = k_all.shape[2]                   # S = P + t
    assert total == past + new_tokens

    # 4. bottom-right causal mask: new token i (position P + i) sees keys 0 .. P + i
    mask = torch.ones(new_tokens, total, dtype=torch.bool, device=x.device).tril(diagonal=total - new_tokens)

    compute_dtype = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(hd)

    # 5. attention, one key/value head at a time with its group of query heads
    #    (query heads j*group .. (j+1)*group - 1 read kv head j, as repeat_interleave pairs them)
    group_outputs = []
    for j in range(H_kv):
        q_group = q[:, j * group:(j + 1) * group].to(compute_dtype)     # (B, group, t, hd)
        k_j = k_all[:, j:j + 1].to(compute_dtype)                       # (B, 1, S, hd), broadcast over the group
        v_j = v_all[:, j:j + 1].to(compute_dtype)                       # (B, 1, S, hd)

        scores = (q_group @ k_j.transpose(-2, -1)) * scale               # (B, group, t, S)
        scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        weights = model.dropout(weights)
        group_outputs.append(weights @ v_j)                              # (B, group, t, hd)

    context = torch.cat(group_outputs, dim=1).to(q.dtype)               # (B, H, t, hd)
    assert context.shape == (batch, H, new_tokens, hd)

    # 6. merge heads and project
    merged = context.transpose(1, 2).reshape(batch, new_tokens, H * hd)
    return model.out_proj(merged)


def decode(model: GroupedQueryAttention, cache: KVCache, x: torch.Tensor, chunk_size: int = 1) -> torch.Tensor:
    """Decode x (B, T, d_model) in chunks of `chunk_size` (>= 1, else ValueError) through `decode_step`.

    Returns:
        (B, T, d_model): from an empty cache, the model's full causal forward of x; after earlier calls, the
        continuation of the cached sequences.
    """
    # chunks x[:, i:i + chunk_size]: (B, t, d_model) each -> outputs (B, t, d_model) -> cat on dim 1: (B, T, d_model)
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be an integer >= 1, got {chunk_size!r}")

    total_tokens = x.shape[1]
    outputs = []
    start = 0
    while start < total_tokens:
        stop = min(start + chunk_size, total_tokens)      # the last chunk may be shorter
        chunk = x[:, start:stop]
        outputs.append(decode_step(model, cache, chunk))
        start = stop

    if len(outputs) == 0:
        # nothing to decode: an empty (B, 0, d_model) result
        return model.out_proj(x[:, :0])
    return torch.cat(outputs, dim=1)
