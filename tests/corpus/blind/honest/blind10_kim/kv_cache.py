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
        for name, value in (("batch_size", batch_size), ("num_kv_heads", num_kv_heads), ("max_len", max_len),
                            ("head_dim", head_dim)):
            if isinstance(value, bool) or int(value) != value or int(value) < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        self.batch_size = int(batch_size)
        self.num_kv_heads = int(num_kv_heads)
        self.max_len = int(max_len)
        self.head_dim = int(head_dim)
        shape = (self.batch_size, self.num_kv_heads, self.max_len, self.head_dim)
        # the whole storage is made once, here; update() only writes into it
        self.register_buffer("k_cache", torch.zeros(shape, dtype=dtype, device=device))
        self.register_buffer("v_cache", torch.zeros(shape, dtype=dtype, device=device))
        self.length = 0                                  # positions 0 .. length - 1 are filled

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write t new positions (k and v each (batch_size, num_kv_heads, t, head_dim)) after the filled ones.

        Returns:
            (k_all, v_all): positions 0 .. length - 1 after the write, each (batch_size, num_kv_heads, length,
            head_dim), in the cache's dtype. Never the unwritten slots beyond `length`.

        Raises:
            ValueError: when length + t > max_len (nothing is written then).
        """
        want = (self.batch_size, self.num_kv_heads, self.head_dim)
        for name, t_ in (("k", k), ("v", v)):
            if t_.dim() != 4 or (int(t_.shape[0]), int(t_.shape[1]), int(t_.shape[3])) != want:
                raise ValueError(f"{name} must be (batch_size={want[0]}, num_kv_heads={want[1]}, t, "
                                 f"head_dim={want[2]}), got {tuple(t_.shape)}")
        if int(k.shape[2]) != int(v.shape[2]):
            raise ValueError(f"k and v hold different numbers of positions: {int(k.shape[2])} and {int(v.shape[2])}")
        t = int(k.shape[2])
        start = self.length
        stop = start + t
        if stop > self.max_len:
            raise ValueError(f"KV cache overflow: {start} positions held + {t} new > max_len {self.max_len}")
        # write the new positions right after the filled ones (copy casts to the cache's dtype and device)
        self.k_cache[:, :, start:stop] = k.to(device=self.k_cache.device, dtype=self.k_cache.dtype)
        self.v_cache[:, :, start:stop] = v.to(device=self.v_cache.device, dtype=self.v_cache.dtype)
        self.length = stop
        return self.k_cache[:, :, :stop], self.v_cache[:, :, :stop]

    def reset(self) -> None:
        """Forget every position: the next update starts a new sequence at position 0."""
        self.length = 0
        with torch.no_grad():                            # not needed for correctness, but no stale numbers remain
            self.k_cache.zero_()
            self.v_cache.zero_()


def decode_step(model: GroupedQueryAttention, cache: KVCache, x: torch.Tensor) -> torch.Tensor:
    """One chunk of new tokens x (B, t, d_model) through `model`, with `cache` holding the earlier ones.

    Returns:
        (B, t, d_model): the rows of the model's full causal forward for these t positions. The cache then holds
        them too.
    """
    H, Hkv, hd = int(model.num_heads), int(model.num_kv_heads), int(model.head_dim)
    if x.dim() != 3:
        raise ValueError(f"x must be (B, t, d_model), got shape {tuple(x.shape)}")
    B, t = int(x.shape[0]), int(x.shape[1])
    if t < 1:
        raise ValueError("decode_step needs at least one new token")
    if B != int(cache.k_cache.shape[0]):
        raise ValueError(f"x holds {B} sequences but the cache was made for {int(cache.k_cache.shape[0])}")
    if H % Hkv != 0:
        raise ValueError(f"num_kv_heads ({Hkv}) must divide num_heads ({H})")
    P = int(cache.length)                                # tokens already cached
    if P + t > int(cache.max_len):
        raise ValueError(f"the cache has room for {int(cache.max_len) - P} more positions, not {t}")
    S = P + t
    g = H // Hkv

    # project only the new tokens
    q = model.W_query(x).view(B, t, H, hd).transpose(1, 2)          # (B, H, t, hd)
    k = model.W_key(x).view(B, t, Hkv, hd).transpose(1, 2)          # (B, Hkv, t, hd)
    v = model.W_value(x).view(B, t, Hkv, hd).transpose(1, 2)        # (B, Hkv, t, hd)
    if model.use_rope:
        # absolute positions of the new tokens: P .. P + t - 1
        where = torch.arange(P, S, device=x.device)
        q = apply_rope(q, model.rope_cos, model.rope_sin, positions=where)
        k = apply_rope(k, model.rope_cos, model.rope_sin, positions=where)

    k_all, v_all = cache.update(k, v)                                # (B, Hkv, S, hd) each
    assert int(k_all.shape[2]) == S, (int(k_all.shape[2]), S)
    k_all = k_all.to(device=q.device, dtype=q.dtype)
    v_all = v_all.to(device=q.device, dtype=v.dtype)

    # query head h = j * g + r reads kv head j = h // g (the repeat_interleave pairing). Instead of copying every kv
    # head g times, stack the g query heads of group j as extra rows: (B, H, t, hd) -> (B, Hkv, g * t, hd); row
    # r * t + i of group j is head j * g + r, token i. Nothing larger than (B, H, t, S) is made.
    q_rows = q.reshape(B, Hkv, g * t, hd)

    # bottom-right causal mask: new token i sits at P + i and sees keys 0 .. P + i
    query_pos = torch.arange(t, device=q.device) + P                 # (t,)
    key_pos = torch.arange(S, device=q.device)                       # (S,)
    allowed = key_pos[None, :] <= query_pos[:, None]                 # (t, S)
    allowed_rows = allowed.repeat(g, 1)                              # (g * t, S): row r * t + i is token i

    work = torch.promote_types(q.dtype, torch.float32)
    scores = torch.matmul(q_rows.to(work), k_all.to(work).transpose(-2, -1)) / math.sqrt(hd)   # (B, Hkv, g*t, S)
    scores = scores.masked_fill(~allowed_rows, float("-inf"))
    weights = torch.softmax(scores, dim=-1).to(v_all.dtype)
    weights = model.dropout(weights)
    context = torch.matmul(weights, v_all).reshape(B, H, t, hd)      # back to one row block per query head
    merged = context.transpose(1, 2).reshape(B, t, H * hd)
    return model.out_proj(merged)


def decode(model: GroupedQueryAttention, cache: KVCache, x: torch.Tensor, chunk_size: int = 1) -> torch.Tensor:
    """Decode x (B, T, d_model) in chunks of `chunk_size` (>= 1, else ValueError) through `decode_step`.

    Returns:
        (B, T, d_model): from an empty cache, the model's full causal forward of x; after earlier calls, the
        continuation of the cached sequences.
    """
    if isinstance(chunk_size, bool) or int(chunk_size) != chunk_size or int(chunk_size) < 1:
        raise ValueError(f"chunk_size must be an integer >= 1, got {chunk_size!r}")
    chunk_size = int(chunk_size)
    if x.dim() != 3:
        raise ValueError(f"x must be (B, T, d_model), got shape {tuple(x.shape)}")
    T = int(x.shape[1])
    room = int(cache.max_len) - int(cache.length)
    if T > room:
        raise ValueError(f"decoding {T} tokens needs {T} free positions, the cache has {room}")
    if T == 0:
        return x.new_zeros((int(x.shape[0]), 0, int(model.out_proj.out_features)))

    pieces = []
    start = 0
    while start < T:
        stop = min(start + chunk_size, T)                            # the last chunk may be shorter
        pieces.append(decode_step(model, cache, x[:, start:stop]))
        start = stop
    return torch.cat(pieces, dim=1)
