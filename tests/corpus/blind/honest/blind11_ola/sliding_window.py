# Generated from solutions/sliding_window.py by `grader build`. Your task: replace each
# `raise NotImplementedError(...)` with working code. Keep the names and signatures.
"""Exercise `sliding_window`: causal attention over a sliding window of keys (Mistral-style local attention).

With a window of w, query i may attend to keys i - w + 1 .. i: itself and the w - 1 tokens before it. So w = 1 sees
only itself (the output is v), and w >= T is ordinary causal attention. (Not the symmetric |i - j| < w of encoder
"local attention", and not i - w .. i, which is w + 1 keys.) Three parts:

- `sliding_window_mask`: the boolean mask, True = may attend (SDPA's convention). Square for self-attention, or
  rectangular (L queries, S keys) for a chunk of L new tokens after S - L cached ones: then it is *bottom-right*
  aligned, as causal masks are in the first assignment: query i sits at absolute position S - L + i.
- `banded_attention`: the same attention computed one block of `block_size` queries at a time, against only the
  band of keys that block can see (keys start - w + 1 .. end - 1). The T x T score matrix is never built: the
  largest intermediate is (block_size, block_size + w - 1), so memory grows with T * w, not T * T.
- `RollingKVCache`: a KV cache holding only the last w keys and values (a ring buffer, or a roll), so that decoding
  token by token (or chunk by chunk) costs O(w) memory and gives exactly the sliding-window attention.

Shapes: (B, H, T, hd) for q and k, (B, H, T, hdv) for v; the scale is 1/sqrt(hd). A window of 0 or less is an
error (raise ValueError). F.scaled_dot_product_attention is not allowed in this exercise: write the softmax.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def sliding_window_mask(seq_len: int, window: int, device: torch.device | str | None = None,
                        kv_len: int | None = None) -> torch.Tensor:
    """Boolean (seq_len, kv_len) sliding-window causal mask, True = may attend.

    Args:
        seq_len: number of queries L.
        window: how many keys each query sees at most (itself included); must be >= 1, else raise ValueError.
        device: where to build the mask (default: CPU).
        kv_len: number of keys S >= L (default: L). The queries are the LAST L of the S positions: query i sits
            at position p = S - L + i and may see the keys max(0, p - window + 1) .. p.

    Returns:
        (L, S), dtype torch.bool.
    """
    # query positions (L, 1) against key positions (1, S) -> (L, S); SDPA broadcasts it over (B, H, L, S)
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    if seq_len < 0:
        raise ValueError(f"seq_len must be >= 0, got {seq_len}")
    S = seq_len if kv_len is None else kv_len
    if S < seq_len:
        raise ValueError(f"kv_len ({S}) must be >= seq_len ({seq_len})")
    return _band(S - seq_len, S, 0, S, window, device)


def _band(q_start: int, q_end: int, k_start: int, k_end: int, window: int,
          device: torch.device | str | None = None) -> torch.Tensor:
    """Boolean (q_end - q_start, k_end - k_start) mask, True = may attend, for queries at absolute positions
    q_start .. q_end - 1 and keys at k_start .. k_end - 1: key j is seen by query p when 0 <= p - j < window."""
    query_pos = torch.arange(q_start, q_end, device=device)
    key_pos = torch.arange(k_start, k_end, device=device)
    offset = query_pos[:, None] - key_pos[None, :]  # how far back each key lies from each query
    return (offset >= 0) & (offset < window)


def _softmax_(scores: torch.Tensor) -> torch.Tensor:
    """Stable softmax over the last dim, in place on my own scores buffer (every row sees at least one key).
    Returns the weights: the same buffer, or a new tensor when autograd needs exp's output."""
    # the row max is a constant shift (softmax does not depend on it), so it needs no gradient of its own
    scores.sub_(scores.amax(dim=-1, keepdim=True).detach()).exp_()
    denom = scores.sum(dim=-1, keepdim=True)
    if scores.requires_grad:  # autograd keeps exp's output for the backward: divide out of place then
        return scores / denom
    return scores.div_(denom)


def banded_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, window: int,
                     block_size: int = 64) -> torch.Tensor:
    """Causal sliding-window self-attention, one block of queries at a time over its band of keys.

    Args:
        query, key: (B, H, T, hd); value: (B, H, T, hdv).
        window: keys per query (>= 1, else ValueError): query i sees keys i - window + 1 .. i.
        block_size: queries per block (>= 1; the last block may be shorter; it may exceed T).

    Returns:
        (B, H, T, hdv), query's dtype (half inputs are computed in float32 and cast back once). Equal to
        softmax(q k^T / sqrt(hd) masked by sliding_window_mask(T, window)) v, but the queries start..end-1 of a
        block only meet the keys max(0, start - window + 1) .. end - 1: never build a (T, T) tensor.
    """
    assert block_size >= 1, "block_size must be a positive integer"
    # one block: queries (B, H, bq, hd), keys and values of its band (B, H, bk, hd) with bk <= bq + window - 1
    # -> scores and weights (B, H, bq, bk) -> block output (B, H, bq, hdv); the outputs are concatenated along T
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    if query.dim() < 2 or query.shape != key.shape or value.shape[:-1] != key.shape[:-1]:
        raise ValueError(f"query and key must be (B, H, T, hd) and value (B, H, T, hdv), got "
                         f"{tuple(query.shape)}, {tuple(key.shape)} and {tuple(value.shape)}")
    T = query.shape[-2]
    compute = torch.promote_types(query.dtype, torch.float32)  # half: computed in float32, cast back once
    scale = 1.0 / math.sqrt(query.shape[-1])
    out = torch.empty(value.shape, dtype=compute, device=query.device)  # (B, H, T, hdv), filled block by block

    for start in range(0, T, block_size):
        end = min(start + block_size, T)
        band_start = max(0, start - window + 1)  # the oldest key any query of this block sees
        q_blk = query[..., start:end, :].to(compute)                 # (B, H, bq, hd)
        k_band = key[..., band_start:end, :].to(compute)             # (B, H, bk, hd), bk <= bq + window - 1
        v_band = value[..., band_start:end, :].to(compute)           # (B, H, bk, hdv)
        scores = torch.matmul(q_blk, k_band.transpose(-2, -1))       # (B, H, bq, bk)
        scores.mul_(scale)
        scores.masked_fill_(~_band(start, end, band_start, end, window, query.device), float("-inf"))
        weights = _softmax_(scores)
        out[..., start:end, :].copy_(torch.matmul(weights, v_band))
    return out.to(query.dtype)


class RollingKVCache(nn.Module):
    """A KV cache for sliding-window decoding that keeps only the last `window` keys and values.

    Args:
        batch_size, num_heads, window, head_dim: the storage is (batch_size, num_heads, window, head_dim) for keys
            and for values; window >= 1, else raise ValueError.
        dtype, device: of the storage.

    Attributes the grader relies on: `k_cache` and `v_cache`, buffers registered with `register_buffer`, each
    (batch_size, num_heads, window, head_dim): the cache never holds more than `window` tokens. How tokens are
    laid out in them is yours (a ring buffer writes token p at slot p % window; a roll shifts them).
    """

    def __init__(self, batch_size: int, num_heads: int, window: int, head_dim: int,
                 dtype: torch.dtype = torch.float32, device: torch.device | str | None = None) -> None:
        super().__init__()
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        if min(batch_size, num_heads, head_dim) < 1:
            raise ValueError(f"batch_size, num_heads and head_dim must be >= 1, got {(batch_size, num_heads, head_dim)}")
        self.batch_size = batch_size
        self.num_heads = num_heads
        self.window = window
        self.head_dim = head_dim
        self.seen = 0  # tokens written since the last reset; token p lives in slot p % window (a ring buffer)
        shape = (batch_size, num_heads, window, head_dim)
        self.register_buffer("k_cache", torch.zeros(shape, dtype=dtype, device=device))
        self.register_buffer("v_cache", torch.zeros(shape, dtype=dtype, device=device))

    def _check(self, **tensors: torch.Tensor) -> int:
        """The number t >= 1 of tokens in the (B, H, t, head_dim) chunks; ValueError on any other shape."""
        t = None
        for name, x in tensors.items():
            if x.dim() != 4 or (x.shape[0], x.shape[1], x.shape[3]) != (self.batch_size, self.num_heads, self.head_dim):
                raise ValueError(f"{name} must be ({self.batch_size}, {self.num_heads}, t, {self.head_dim}), got "
                                 f"shape {tuple(x.shape)}")
            if t is not None and x.shape[2] != t:
                raise ValueError("the chunks hold different numbers of tokens")
            t = x.shape[2]
        if t is None or t < 1:
            raise ValueError("at least one new token is needed")
        return t

    def _held_count(self) -> int:
        return min(self.seen, self.window)

    def _copy_held(self, src: torch.Tensor, dst: torch.Tensor) -> None:
        """Copy the held tokens of ring buffer `src`, oldest first, into dst[:, :, :n] (two slices at most)."""
        n = self._held_count()
        first_slot = (self.seen - n) % self.window      # slot of the oldest held token
        first = min(n, self.window - first_slot)        # tokens before the ring wraps
        dst[:, :, :first].copy_(src[:, :, first_slot:first_slot + first])
        dst[:, :, first:n].copy_(src[:, :, :n - first])

    def _write(self, dst: torch.Tensor, src: torch.Tensor) -> None:
        """Write the chunk src (B, H, t, hd) into ring buffer dst as tokens seen .. seen + t - 1 (only the last
        `window` of them survive, so only those are written)."""
        t = src.shape[2]
        m = min(t, self.window)
        first_slot = (self.seen + t - m) % self.window
        first = min(m, self.window - first_slot)
        dst[:, :, first_slot:first_slot + first].copy_(src[:, :, t - m:t - m + first])
        dst[:, :, :m - first].copy_(src[:, :, t - m + first:])

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append t >= 1 new tokens' keys and values (each (B, H, t, head_dim)); keep only the last `window`.

        Returns:
            (k_all, v_all): the keys and values now held, oldest first, each (B, H, n, head_dim) with
            n = min(tokens seen since the last reset, window). Never return slots that were not written.
        """
        t = self._check(k=k, v=v)
        self._write(self.k_cache, k)
        self._write(self.v_cache, v)
        self.seen += t
        return self.held()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Attend t >= 1 new tokens (q, k, v each (B, H, t, head_dim)) over the window, then cache their k, v.

        New token i sits at position p = seen + i and attends to the positions max(0, p - window + 1) .. p: the
        held keys first, then the chunk's own (a bottom-right aligned sliding_window_mask). Decoding a sequence
        token by token, or chunk by chunk, gives exactly banded_attention over the whole sequence.

        Returns:
            (B, H, t, head_dim), q's dtype.
        """
        # held keys (B, H, n, hd) then the chunk's (B, H, t, hd) -> keys (B, H, n + t, hd); scores (B, H, t, n + t)
        t = self._check(q=q, k=k, v=v)
        n = self._held_count()
        compute = torch.promote_types(q.dtype, torch.float32)
        B, H, _, hd = q.shape
        # held keys first, then the chunk's own: preallocated once and filled in place
        keys = torch.empty((B, H, n + t, hd), dtype=compute, device=q.device)
        values = torch.empty((B, H, n + t, hd), dtype=compute, device=q.device)
        self._copy_held(self.k_cache, keys)
        self._copy_held(self.v_cache, values)
        keys[:, :, n:].copy_(k)
        values[:, :, n:].copy_(v)

        scores = torch.matmul(q.to(compute), keys.transpose(-2, -1))  # (B, H, t, n + t)
        scores.mul_(1.0 / math.sqrt(hd))
        # bottom-right aligned: new token i sits at n + i among these n + t keys
        scores.masked_fill_(~sliding_window_mask(t, self.window, device=q.device, kv_len=n + t), float("-inf"))
        weights = _softmax_(scores)
        out = torch.matmul(weights, values).to(q.dtype)
        self._write(self.k_cache, k)  # then cache the chunk (no copies of the held tokens needed here)
        self._write(self.v_cache, v)
        self.seen += t
        return out

    def reset(self) -> None:
        """Forget every token: the next update starts a new sequence."""
        self.seen = 0

    def held(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(keys, values) held now, oldest first: (B, H, min(seen, window), head_dim) each (copies)."""
        n = self._held_count()
        B, H, _, hd = self.k_cache.shape
        k_all = torch.empty((B, H, n, hd), dtype=self.k_cache.dtype, device=self.k_cache.device)
        v_all = torch.empty((B, H, n, hd), dtype=self.v_cache.dtype, device=self.v_cache.device)
        self._copy_held(self.k_cache, k_all)
        self._copy_held(self.v_cache, v_all)
        return k_all, v_all
