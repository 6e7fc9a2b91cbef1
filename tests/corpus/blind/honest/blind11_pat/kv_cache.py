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
            raise ValueError("batch_size, num_kv_heads, max_len and head_dim must all be >= 1")
        shape = (batch_size, num_kv_heads, max_len, head_dim)                # (B, Hkv, max_len, hd)
        self.register_buffer("k_cache", torch.zeros(shape, dtype=dtype, device=device))
        self.register_buffer("v_cache", torch.zeros(shape, dtype=dtype, device=device))
        self.max_len = int(max_len)
        self.length = 0                                                      # positions 0 .. length - 1 are filled

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write t new positions (k and v each (batch_size, num_kv_heads, t, head_dim)) after the filled ones.

        Returns:
            (k_all, v_all): positions 0 .. length - 1 after the write, each (batch_size, num_kv_heads, length,
            head_dim), in the cache's dtype. Never the unwritten slots beyond `length`.

        Raises:
            ValueError: when length + t > max_len (nothing is written then).
        """
        B, Hkv, N, hd = self.k_cache.shape
        if k.shape != v.shape or k.dim() != 4 or (k.shape[0], k.shape[1], k.shape[3]) != (B, Hkv, hd):
            raise ValueError(f"k and v must both be ({B}, {Hkv}, t, {hd}), got {tuple(k.shape)} and {tuple(v.shape)}")
        t = k.shape[2]
        P = self.length
        if P + t > self.max_len:                                             # checked before anything is written
            raise ValueError(f"KV cache overflow: {P} positions held + {t} new > max_len = {self.max_len}")
        self.k_cache[:, :, P:P + t] = k.to(self.k_cache.dtype)               # slots P .. P + t - 1
        self.v_cache[:, :, P:P + t] = v.to(self.v_cache.dtype)
        self.length = P + t
        k_all = self.k_cache[:, :, :self.length]                             # (B, Hkv, S, hd), S = P + t
        v_all = self.v_cache[:, :, :self.length]
        assert k_all.shape == v_all.shape == (B, Hkv, P + t, hd) and N == self.max_len
        return k_all, v_all

    def reset(self) -> None:
        """Forget every position: the next update starts a new sequence at position 0."""
        self.length = 0
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
    if x.dim() != 3:
        raise ValueError(f"x must be (B, t, d_model), got shape {tuple(x.shape)}")
    B, t, d = x.shape
    H, Hkv, hd = model.num_heads, model.num_kv_heads, model.head_dim
    g = H // Hkv                                                             # query heads per kv head
    P = cache.length                                                         # tokens already cached
    if P + t > cache.max_len:                                                # before any projection or rotation
        raise ValueError(f"KV cache overflow: {P} positions held + {t} new > max_len = {cache.max_len}")
    S = P + t

    q = model.W_query(x).view(B, t, H, hd).transpose(1, 2)                  # (B, H, t, hd)
    k = model.W_key(x).view(B, t, Hkv, hd).transpose(1, 2)                  # (B, Hkv, t, hd)
    v = model.W_value(x).view(B, t, Hkv, hd).transpose(1, 2)                # (B, Hkv, t, hd)
    if model.use_rope:                                                       # absolute positions P .. P + t - 1
        positions = torch.arange(P, S, device=x.device)                      # (t,)
        q = apply_rope(q, model.rope_cos, model.rope_sin, positions=positions)
        k = apply_rope(k, model.rope_cos, model.rope_sin, positions=positions)
    k_all, v_all = cache.update(k, v)                                        # (B, Hkv, S, hd) each
    k_all, v_all = k_all.to(q.dtype), v_all.to(q.dtype)
    assert k_all.shape == v_all.shape == (B, Hkv, S, hd) and cache.length == S

    # query head h = j * g + r reads kv head j = h // g
    qg = q.unflatten(1, (Hkv, g))                                            # (B, Hkv, g, t, hd)
    scores = torch.einsum("bjrid,bjsd->bjris", qg, k_all) / math.sqrt(hd)    # (B, Hkv, g, t, S)
    # bottom-right causal mask: new token i sits at position P + i and sees keys s <= P + i
    i_pos = torch.arange(t, device=x.device) + P                             # (t,)
    s_pos = torch.arange(S, device=x.device)                                 # (S,)
    visible = s_pos[None, :] <= i_pos[:, None]                               # (t, S) = ones(t, S).tril(S - t)
    scores = torch.where(visible, scores, float("-inf"))
    weights = torch.softmax(scores, dim=-1)                                  # (B, Hkv, g, t, S)
    assert bool(torch.isfinite(weights).all()), "every new token sees at least itself: weights are finite"
    weights = model.dropout(weights)
    context = torch.einsum("bjris,bjsd->bjrid", weights, v_all)              # (B, Hkv, g, t, hd)
    merged = context.flatten(1, 2).transpose(1, 2).reshape(B, t, H * hd)     # (B, t, d_model)
    out = model.out_proj(merged)                                             # (B, t, d_model)
    assert out.shape == (B, t, d)
    return out


def decode(model: GroupedQueryAttention, cache: KVCache, x: torch.Tensor, chunk_size: int = 1) -> torch.Tensor:
    """Decode x (B, T, d_model) in chunks of `chunk_size` (>= 1, else ValueError) through `decode_step`.

    Returns:
        (B, T, d_model): from an empty cache, the model's full causal forward of x; after earlier calls, the
        continuation of the cached sequences.
    """
    # chunks x[:, i:i + chunk_size]: (B, t, d_model) each -> outputs (B, t, d_model) -> cat on dim 1: (B, T, d_model)
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be an integer >= 1, got {chunk_size!r}")
    if x.dim() != 3:
        raise ValueError(f"x must be (B, T, d_model), got shape {tuple(x.shape)}")
    B, T, d = x.shape
    if cache.length + T > cache.max_len:                                     # refuse before decoding anything
        raise ValueError(f"KV cache overflow: {cache.length} positions held + {T} new > max_len = {cache.max_len}")
    outputs = [decode_step(model, cache, x[:, i:i + chunk_size]) for i in range(0, T, chunk_size)]
    if not outputs:                                                          # T = 0: nothing to decode
        return x.new_zeros(B, 0, d)
    out = torch.cat(outputs, dim=1)                                          # (B, T, d_model)
    assert out.shape == (B, T, d)
    return out
