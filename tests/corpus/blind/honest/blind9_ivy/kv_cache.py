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


def _repeat_kv(hidden: torch.Tensor, n_rep: int) -> torch.Tensor:
    """(B, Hkv, S, hd) -> (B, Hkv * n_rep, S, hd), kv head j serving query heads j * n_rep .. (j + 1) * n_rep - 1
    (the order of `repeat_interleave(n_rep, dim=1)`, not the tiling of `repeat`)."""
    if n_rep == 1:
        return hidden
    batch, kv_heads, seq_len, head_dim = hidden.shape
    return (hidden[:, :, None, :, :].expand(batch, kv_heads, n_rep, seq_len, head_dim)
            .reshape(batch, kv_heads * n_rep, seq_len, head_dim))


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


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
        self.batch_size = _positive_int("batch_size", batch_size)
        self.num_kv_heads = _positive_int("num_kv_heads", num_kv_heads)
        self.max_len = _positive_int("max_len", max_len)
        self.head_dim = _positive_int("head_dim", head_dim)
        shape = (self.batch_size, self.num_kv_heads, self.max_len, self.head_dim)
        self.register_buffer("k_cache", torch.zeros(shape, dtype=dtype, device=device))
        self.register_buffer("v_cache", torch.zeros(shape, dtype=dtype, device=device))
        self.length = 0

    def _check_chunk(self, name: str, t: torch.Tensor) -> int:
        expected = (self.batch_size, self.num_kv_heads, self.head_dim)
        if t.dim() != 4 or (t.shape[0], t.shape[1], t.shape[3]) != expected:
            raise ValueError(f"{name} must be ({self.batch_size}, {self.num_kv_heads}, t, {self.head_dim}), "
                             f"got {tuple(t.shape)}")
        return t.shape[2]

    @torch.no_grad()
    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write t new positions (k and v each (batch_size, num_kv_heads, t, head_dim)) after the filled ones.

        Returns:
            (k_all, v_all): positions 0 .. length - 1 after the write, each (batch_size, num_kv_heads, length,
            head_dim), in the cache's dtype. Never the unwritten slots beyond `length`.

        Raises:
            ValueError: when length + t > max_len (nothing is written then).
        """
        t = self._check_chunk("k", k)
        if self._check_chunk("v", v) != t:
            raise ValueError(f"k and v must hold the same number of positions, got {t} and {v.shape[2]}")
        start, end = self.length, self.length + t
        if end > self.max_len:  # capacity guard before any write
            raise ValueError(f"KV cache overflow: {start} positions held + {t} new > max_len {self.max_len}")
        self.k_cache[:, :, start:end].copy_(k)
        self.v_cache[:, :, start:end].copy_(v)
        self.length = end
        return self.k_cache[:, :, :end], self.v_cache[:, :, :end]

    @torch.no_grad()
    def reset(self) -> None:
        """Forget every position: the next update starts a new sequence at position 0."""
        self.k_cache.zero_()
        self.v_cache.zero_()
        self.length = 0


def decode_step(model: GroupedQueryAttention, cache: KVCache, x: torch.Tensor) -> torch.Tensor:
    """One chunk of new tokens x (B, t, d_model) through `model`, with `cache` holding the earlier ones.

    Returns:
        (B, t, d_model): the rows of the model's full causal forward for these t positions. The cache then holds
        them too.
    """
    n_heads, n_kv_heads, head_dim = model.num_heads, model.num_kv_heads, model.head_dim
    d_model = n_heads * head_dim
    if x.dim() != 3 or x.shape[-1] != d_model:
        raise ValueError(f"x must be (B, t, {d_model}), got {tuple(x.shape)}")
    if n_heads % n_kv_heads != 0:
        raise ValueError(f"num_kv_heads ({n_kv_heads}) must divide num_heads ({n_heads})")
    bsz, seq_len, _ = x.shape
    if seq_len < 1:
        raise ValueError("decode_step needs at least one new token")
    past = cache.length
    total = past + seq_len
    if total > cache.max_len:  # refuse before projecting anything
        raise ValueError(f"KV cache overflow: {past} cached + {seq_len} new tokens > max_len {cache.max_len}")

    # project the NEW tokens only
    q = model.W_query(x).view(bsz, seq_len, n_heads, head_dim).transpose(1, 2)      # (B, H, t, hd)
    k = model.W_key(x).view(bsz, seq_len, n_kv_heads, head_dim).transpose(1, 2)     # (B, Hkv, t, hd)
    v = model.W_value(x).view(bsz, seq_len, n_kv_heads, head_dim).transpose(1, 2)

    if model.use_rope:  # absolute positions past .. past + t - 1, on q and k only
        if total > model.rope_cos.shape[0]:
            raise ValueError(f"position {total - 1} is beyond the model's RoPE tables ({model.rope_cos.shape[0]})")
        positions = torch.arange(past, total, device=x.device)
        q = apply_rope(q, model.rope_cos, model.rope_sin, positions)
        k = apply_rope(k, model.rope_cos, model.rope_sin, positions)

    k_all, v_all = cache.update(k, v)                                                # (B, Hkv, S, hd)

    compute = torch.promote_types(q.dtype, torch.float32)
    n_rep = n_heads // n_kv_heads
    # snapshot the filled prefix (copy=True): later writes into the cache must not alter tensors that autograd
    # saved for this step's backward
    k_all = _repeat_kv(k_all.to(device=q.device, dtype=compute, copy=True), n_rep)   # (B, H, S, hd)
    v_all = _repeat_kv(v_all.to(device=q.device, dtype=compute, copy=True), n_rep)

    scores = torch.matmul(q.to(compute), k_all.transpose(-2, -1)) * (1.0 / math.sqrt(head_dim))   # (B, H, t, S)
    # bottom-right causal: new token i sits at position past + i and sees keys 0 .. past + i
    visible = torch.ones(seq_len, total, dtype=torch.bool, device=x.device).tril(diagonal=total - seq_len)
    scores = scores.masked_fill(~visible, float("-inf"))
    weights = model.dropout(torch.softmax(scores, dim=-1))
    context = torch.matmul(weights, v_all).to(q.dtype)                               # (B, H, t, hd)
    context = context.transpose(1, 2).reshape(bsz, seq_len, d_model)
    return model.out_proj(context)


def decode(model: GroupedQueryAttention, cache: KVCache, x: torch.Tensor, chunk_size: int = 1) -> torch.Tensor:
    """Decode x (B, T, d_model) in chunks of `chunk_size` (>= 1, else ValueError) through `decode_step`.

    Returns:
        (B, T, d_model): from an empty cache, the model's full causal forward of x; after earlier calls, the
        continuation of the cached sequences.
    """
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be an integer >= 1, got {chunk_size!r}")
    if x.dim() != 3:
        raise ValueError(f"x must be (B, T, d_model), got {tuple(x.shape)}")
    if cache.length + x.shape[1] > cache.max_len:  # nothing is decoded (or cached) when it cannot all fit
        raise ValueError(f"KV cache overflow: {cache.length} cached + {x.shape[1]} new tokens > max_len "
                         f"{cache.max_len}")
    if x.shape[1] == 0:
        return x.new_empty(x.shape[0], 0, x.shape[2])  # nothing to decode, nothing to cache
    outputs = [decode_step(model, cache, chunk) for chunk in torch.split(x, chunk_size, dim=1)]
    return torch.cat(outputs, dim=1)
