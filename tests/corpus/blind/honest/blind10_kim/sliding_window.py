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
    window = _check_window(window)
    if isinstance(seq_len, bool) or int(seq_len) != seq_len or int(seq_len) < 0:
        raise ValueError(f"seq_len must be a non-negative integer, got {seq_len!r}")
    L = int(seq_len)
    if kv_len is None:
        S = L
    else:
        if isinstance(kv_len, bool) or int(kv_len) != kv_len:
            raise ValueError(f"kv_len must be an integer, got {kv_len!r}")
        S = int(kv_len)
        if S < L:
            raise ValueError(f"kv_len ({S}) must be at least seq_len ({L}): the queries are the last seq_len keys")
    if device is None:
        device = "cpu"
    # absolute positions: the L queries are the last L of the S keys (bottom-right alignment)
    query_pos = torch.arange(L, device=device) + (S - L)            # (L,)
    key_pos = torch.arange(S, device=device)                        # (S,)
    not_future = key_pos[None, :] <= query_pos[:, None]             # (L, S)
    recent = key_pos[None, :] > query_pos[:, None] - window         # (L, S): within window - 1 positions back
    return not_future & recent


def _check_window(window: int) -> int:
    """window as a Python int after checking it is a whole number >= 1."""
    if isinstance(window, bool) or int(window) != window:
        raise ValueError(f"window must be an integer, got {window!r}")
    if int(window) < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    return int(window)


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
    window = _check_window(window)
    block_size = int(block_size)
    if query.dim() < 2 or key.dim() != query.dim() or value.dim() != query.dim():
        raise ValueError(f"query, key and value must be (B, H, T, d) alike, got {tuple(query.shape)}, "
                         f"{tuple(key.shape)}, {tuple(value.shape)}")
    T = int(query.shape[-2])
    if int(key.shape[-2]) != T or int(value.shape[-2]) != T:
        raise ValueError(f"self-attention: query, key and value need the same T, got {T}, {int(key.shape[-2])}, "
                         f"{int(value.shape[-2])}")
    if int(key.shape[-1]) != int(query.shape[-1]):
        raise ValueError(f"query and key need the same head_dim, got {int(query.shape[-1])} and {int(key.shape[-1])}")
    if query.shape[:-2] != key.shape[:-2] or query.shape[:-2] != value.shape[:-2]:
        raise ValueError(f"query, key and value need the same leading dims, got {tuple(query.shape[:-2])}, "
                         f"{tuple(key.shape[:-2])}, {tuple(value.shape[:-2])}")

    work = torch.promote_types(query.dtype, torch.float32)          # half -> float32, float64 stays float64
    scale = 1.0 / math.sqrt(int(query.shape[-1]))
    if T == 0:
        return query.new_zeros((*query.shape[:-1], int(value.shape[-1])))

    outputs = []
    for start in range(0, T, block_size):
        end = min(start + block_size, T)                              # the last block may be shorter
        lo = max(0, start - window + 1)                               # the oldest key any query of the block sees
        q_blk = query[..., start:end, :].to(work)                     # (B, H, bq, hd)
        k_band = key[..., lo:end, :].to(work)                         # (B, H, bk, hd), bk <= bq + window - 1
        v_band = value[..., lo:end, :].to(work)
        bq, bk = end - start, end - lo
        assert bk <= bq + window - 1
        scores = torch.matmul(q_blk, k_band.transpose(-2, -1)) * scale   # (B, H, bq, bk)
        # inside the band the block's queries are its last bq positions: a bottom-right aligned window mask
        keep = sliding_window_mask(bq, window, device=query.device, kv_len=bk)
        scores = scores.masked_fill(~keep, float("-inf"))
        # every query sees at least itself, so no row is all -inf
        weights = torch.softmax(scores, dim=-1)
        outputs.append(torch.matmul(weights, v_band))                 # (B, H, bq, hdv)
    return torch.cat(outputs, dim=-2).to(query.dtype)


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
        window = _check_window(window)
        for name, value in (("batch_size", batch_size), ("num_heads", num_heads), ("head_dim", head_dim)):
            if isinstance(value, bool) or int(value) != value or int(value) < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        self.batch_size = int(batch_size)
        self.num_heads = int(num_heads)
        self.window = window
        self.head_dim = int(head_dim)
        shape = (self.batch_size, self.num_heads, self.window, self.head_dim)
        # a ring buffer: token p lives in slot p % window
        self.register_buffer("k_cache", torch.zeros(shape, dtype=dtype, device=device))
        self.register_buffer("v_cache", torch.zeros(shape, dtype=dtype, device=device))
        self.seen = 0                                    # tokens written since construction / the last reset

    def _check_chunk(self, name: str, t_: torch.Tensor) -> int:
        want = (self.batch_size, self.num_heads, self.head_dim)
        if t_.dim() != 4 or (int(t_.shape[0]), int(t_.shape[1]), int(t_.shape[3])) != want:
            raise ValueError(f"{name} must be (batch_size={want[0]}, num_heads={want[1]}, t, head_dim={want[2]}), "
                             f"got {tuple(t_.shape)}")
        if int(t_.shape[2]) < 1:
            raise ValueError(f"{name} must hold at least one token")
        return int(t_.shape[2])

    def _slots(self, first: int, last: int) -> torch.Tensor:
        """Ring slots of the absolute positions first .. last - 1 (at most `window` of them)."""
        assert 0 <= last - first <= self.window
        return torch.arange(first, last, device=self.k_cache.device) % self.window

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append t >= 1 new tokens' keys and values (each (B, H, t, head_dim)); keep only the last `window`.

        Returns:
            (k_all, v_all): the keys and values now held, oldest first, each (B, H, n, head_dim) with
            n = min(tokens seen since the last reset, window). Never return slots that were not written.
        """
        t = self._check_chunk("k", k)
        if self._check_chunk("v", v) != t:
            raise ValueError(f"k and v hold different numbers of tokens: {t} and {int(v.shape[2])}")
        # only the last `window` of the chunk can survive; older ones would be overwritten anyway
        keep = min(t, self.window)
        first = self.seen + t - keep                    # absolute position of the first token we store
        slots = self._slots(first, self.seen + t)
        k_new = k[:, :, t - keep:].to(device=self.k_cache.device, dtype=self.k_cache.dtype)
        v_new = v[:, :, t - keep:].to(device=self.v_cache.device, dtype=self.v_cache.dtype)
        self.k_cache.index_copy_(2, slots, k_new)
        self.v_cache.index_copy_(2, slots, v_new)
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
        t = self._check_chunk("q", q)
        if self._check_chunk("k", k) != t or self._check_chunk("v", v) != t:
            raise ValueError("q, k and v must hold the same number of new tokens")
        held_k, held_v = self.held()                                  # (B, H, n, hd), oldest first
        n = int(held_k.shape[2])
        work = torch.promote_types(q.dtype, torch.float32)
        keys = torch.cat([held_k.to(device=q.device, dtype=work), k.to(work)], dim=2)     # (B, H, n + t, hd)
        values = torch.cat([held_v.to(device=q.device, dtype=work), v.to(work)], dim=2)
        scores = torch.matmul(q.to(work), keys.transpose(-2, -1)) / math.sqrt(int(q.shape[-1]))   # (B, H, t, n + t)
        # the held keys sit at positions seen - n .. seen - 1, the new queries at seen .. seen + t - 1
        keep = sliding_window_mask(t, self.window, device=q.device, kv_len=n + t)
        scores = scores.masked_fill(~keep, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        out = torch.matmul(weights, values)
        # only now store the chunk (a chunk longer than the window needs its own early keys above)
        self.update(k, v)
        return out.to(q.dtype)

    def reset(self) -> None:
        """Forget every token: the next update starts a new sequence."""
        self.seen = 0
        with torch.no_grad():
            self.k_cache.zero_()
            self.v_cache.zero_()

    def held(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(keys, values) held now, oldest first: (B, H, min(seen, window), head_dim) each (copies)."""
        n = min(self.seen, self.window)
        slots = self._slots(self.seen - n, self.seen)                 # oldest first; only written slots
        # index_select copies, so the caller never aliases the ring
        return torch.index_select(self.k_cache, 2, slots), torch.index_select(self.v_cache, 2, slots)
