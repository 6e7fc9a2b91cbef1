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
        if min(batch_size, num_kv_heads, max_len, head_dim) < 1:
            raise ValueError("batch_size, num_kv_heads, max_len and head_dim must all be >= 1, got "
                             f"{(batch_size, num_kv_heads, max_len, head_dim)}")
        self.batch_size = batch_size
        self.num_kv_heads = num_kv_heads
        self.max_len = max_len
        self.head_dim = head_dim
        self.length = 0
        shape = (batch_size, num_kv_heads, max_len, head_dim)
        self.register_buffer("k_cache", torch.zeros(shape, dtype=dtype, device=device))
        self.register_buffer("v_cache", torch.zeros(shape, dtype=dtype, device=device))

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write t new positions (k and v each (batch_size, num_kv_heads, t, head_dim)) after the filled ones.

        Returns:
            (k_all, v_all): positions 0 .. length - 1 after the write, each (batch_size, num_kv_heads, length,
            head_dim), in the cache's dtype. Never the unwritten slots beyond `length`.

        Raises:
            ValueError: when length + t > max_len (nothing is written then).
        """
        expected = (self.batch_size, self.num_kv_heads, self.head_dim)
        for name, t in (("k", k), ("v", v)):
            if t.dim() != 4 or (t.shape[0], t.shape[1], t.shape[3]) != expected:
                raise ValueError(f"{name} must be ({self.batch_size}, {self.num_kv_heads}, t, {self.head_dim}), "
                                 f"got shape {tuple(t.shape)}")
        if k.shape[2] != v.shape[2]:
            raise ValueError(f"k and v hold different numbers of positions: {k.shape[2]} and {v.shape[2]}")
        t = k.shape[2]
        start, end = self.length, self.length + t
        if end > self.max_len:  # checked before anything is written
            raise ValueError(f"KV cache overflow: {self.length} positions held + {t} new > max_len = {self.max_len}")
        self.k_cache[:, :, start:end].copy_(k)  # copy_ casts to the cache's dtype and device
        self.v_cache[:, :, start:end].copy_(v)
        self.length = end
        return self.k_cache[:, :, :end], self.v_cache[:, :, :end]

    def reset(self) -> None:
        """Forget every position: the next update starts a new sequence at position 0."""
        self.length = 0  # the old contents stay in the buffers but are never returned: update overwrites them


def decode_step(model: GroupedQueryAttention, cache: KVCache, x: torch.Tensor) -> torch.Tensor:
    """One chunk of new tokens x (B, t, d_model) through `model`, with `cache` holding the earlier ones.

    Returns:
        (B, t, d_model): the rows of the model's full causal forward for these t positions. The cache then holds
        them too.
    """
    # q: (B, t, d_model) -> (B, H, t, hd); k, v: (B, t, Hkv * hd) -> (B, Hkv, t, hd); k_all, v_all: (B, Hkv, S, hd)
    # grouped: (B, H, S, hd); scores, weights: (B, H, t, S); context: (B, H, t, hd) -> (B, t, d_model)
    if x.dim() != 3:
        raise ValueError(f"x must be (B, t, d_model), got shape {tuple(x.shape)}")
    B, t, _ = x.shape
    if t < 1:
        raise ValueError("decode_step needs at least one new token")
    H, Hkv, hd = model.num_heads, model.num_kv_heads, model.head_dim
    P = cache.length

    # only the NEW tokens are projected
    q = model.W_query(x).view(B, t, H, hd).transpose(1, 2)          # (B, H, t, hd)
    k = model.W_key(x).view(B, t, Hkv, hd).transpose(1, 2)          # (B, Hkv, t, hd)
    v = model.W_value(x).view(B, t, Hkv, hd).transpose(1, 2)        # (B, Hkv, t, hd)
    if model.use_rope:  # absolute positions P .. P + t - 1, queries and keys only
        positions = torch.arange(P, P + t, device=x.device)
        q = apply_rope(q, model.rope_cos, model.rope_sin, positions=positions)
        k = apply_rope(k, model.rope_cos, model.rope_sin, positions=positions)

    k_all, v_all = cache.update(k, v)                               # (B, Hkv, S, hd), S = P + t
    S = k_all.shape[2]

    compute = torch.promote_types(q.dtype, torch.float32)           # half: float32 scores and softmax
    k_all = _group_heads(k_all.to(compute), H)                      # (B, H, S, hd)
    v_all = _group_heads(v_all.to(compute), H)

    scores = torch.matmul(q.to(compute), k_all.transpose(-2, -1))   # (B, H, t, S), my own buffer
    scores.mul_(1.0 / math.sqrt(hd))
    # bottom-right causal: new token i sits at position P + i = S - t + i and sees keys 0 .. S - t + i
    query_pos = torch.arange(S - t, S, device=scores.device)
    key_pos = torch.arange(S, device=scores.device)
    scores.masked_fill_(key_pos[None, :] - query_pos[:, None] > 0, float("-inf"))
    weights = model.dropout(_softmax_(scores))

    context = torch.matmul(weights, v_all)                          # (B, H, t, hd)
    merged = context.transpose(1, 2).reshape(B, t, H * hd).to(q.dtype)
    return model.out_proj(merged)


def _group_heads(t: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(B, Hkv, S, hd) -> (B, num_heads, S, hd): query head h reads kv head h // g, as repeat_interleave(g, dim=1),
    by expanding a new group axis and folding it into the heads."""
    B, Hkv, S, hd = t.shape
    g = num_heads // Hkv
    if g == 1:
        return t
    return t[:, :, None].expand(B, Hkv, g, S, hd).reshape(B, Hkv * g, S, hd)


def _softmax_(scores: torch.Tensor) -> torch.Tensor:
    """Numerically stable softmax over the last dim, in place on my own scores buffer (every row sees a key).
    Returns the weights: the same buffer, or a new tensor when autograd needs exp's output."""
    # the row max is a constant shift (softmax does not depend on it), so it needs no gradient of its own
    scores.sub_(scores.amax(dim=-1, keepdim=True).detach()).exp_()
    denom = scores.sum(dim=-1, keepdim=True)
    if scores.requires_grad:  # autograd keeps exp's output for the backward: divide out of place then
        return scores / denom
    return scores.div_(denom)


def decode(model: GroupedQueryAttention, cache: KVCache, x: torch.Tensor, chunk_size: int = 1) -> torch.Tensor:
    """Decode x (B, T, d_model) in chunks of `chunk_size` (>= 1, else ValueError) through `decode_step`.

    Returns:
        (B, T, d_model): from an empty cache, the model's full causal forward of x; after earlier calls, the
        continuation of the cached sequences.
    """
    # chunks x[:, i:i + chunk_size]: (B, t, d_model) each -> outputs (B, t, d_model) -> cat on dim 1: (B, T, d_model)
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    if x.dim() != 3:
        raise ValueError(f"x must be (B, T, d_model), got shape {tuple(x.shape)}")
    B, T, _ = x.shape
    out: torch.Tensor | None = None
    for start in range(0, T, chunk_size):
        end = min(start + chunk_size, T)
        y = decode_step(model, cache, x[:, start:end])
        if out is None:  # preallocated once, filled chunk by chunk
            out = torch.empty((B, T) + tuple(y.shape[2:]), dtype=y.dtype, device=y.device)
        out[:, start:end].copy_(y)
    if out is None:  # T == 0: nothing to decode
        out = x.new_empty((B, 0, model.out_proj.out_features))
    return out
