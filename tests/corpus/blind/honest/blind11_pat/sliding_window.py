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
    L = seq_len
    S = L if kv_len is None else kv_len
    if L < 0 or S < L:
        raise ValueError(f"need 0 <= seq_len <= kv_len, got seq_len = {L}, kv_len = {S}")
    p = torch.arange(L, device=device)[:, None] + (S - L)                   # (L, 1): absolute query positions
    j = torch.arange(S, device=device)[None, :]                             # (1, S): key positions
    mask = (j <= p) & (j > p - window)                                      # (L, S): p - w + 1 <= j <= p
    assert mask.shape == (L, S) and mask.dtype == torch.bool
    return mask


def _window_softmax_attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int) -> torch.Tensor:
    """softmax(q k^T / sqrt(hd), masked by the bottom-right sliding_window_mask) v for one tile.

    q (B, H, l, hd), k (B, H, s, hd), v (B, H, s, hdv) with l <= s, all in the working dtype; the l queries are
    the last l of the s positions. Returns (B, H, l, hdv)."""
    l, s, hd = q.shape[-2], k.shape[-2], q.shape[-1]
    scores = torch.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(hd)         # (B, H, l, s)
    mask = sliding_window_mask(l, window, device=q.device, kv_len=s)        # (l, s)
    scores = torch.where(mask, scores, float("-inf"))
    weights = torch.softmax(scores, dim=-1)                                 # (B, H, l, s), rows sum to 1
    assert bool(torch.isfinite(weights).all()), "every query sees at least itself: weights are finite"
    out = torch.einsum("bhij,bhjd->bhid", weights, v)                       # (B, H, l, hdv)
    assert out.shape == (*q.shape[:-1], v.shape[-1])
    return out


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
    B, H, T, hd = query.shape
    assert key.shape == (B, H, T, hd) and value.shape[:-1] == (B, H, T), "q, k: (B, H, T, hd); v: (B, H, T, hdv)"
    work = torch.promote_types(query.dtype, torch.float32)                  # half -> float32, once
    q, k, v = query.to(work), key.to(work), value.to(work)
    out = torch.empty(B, H, T, value.shape[-1], dtype=work, device=query.device)  # (B, H, T, hdv)
    for start in range(0, T, block_size):
        end = min(start + block_size, T)                                    # queries start .. end - 1
        lo = max(0, start - window + 1)                                     # first key any of them sees
        # (B, H, end - start, hd) against (B, H, end - lo, hd), end - lo <= block_size + window - 1
        out[:, :, start:end] = _window_softmax_attend(q[:, :, start:end], k[:, :, lo:end], v[:, :, lo:end], window)
    out = out.to(query.dtype)
    assert out.shape == (B, H, T, value.shape[-1]) and out.dtype == query.dtype
    return out


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
        shape = (batch_size, num_heads, window, head_dim)                   # (B, H, w, hd)
        self.register_buffer("k_cache", torch.zeros(shape, dtype=dtype, device=device))
        self.register_buffer("v_cache", torch.zeros(shape, dtype=dtype, device=device))
        self.window = int(window)
        self.seen = 0                                                       # tokens since the last reset
        # ring buffer: token at absolute position p lives in slot p mod w

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append t >= 1 new tokens' keys and values (each (B, H, t, head_dim)); keep only the last `window`.

        Returns:
            (k_all, v_all): the keys and values now held, oldest first, each (B, H, n, head_dim) with
            n = min(tokens seen since the last reset, window). Never return slots that were not written.
        """
        B, H, w, hd = self.k_cache.shape
        if k.shape != v.shape or k.dim() != 4 or (k.shape[0], k.shape[1], k.shape[3]) != (B, H, hd):
            raise ValueError(f"k and v must both be ({B}, {H}, t, {hd}), got {tuple(k.shape)} and {tuple(v.shape)}")
        t = k.shape[2]
        if t < 1:
            raise ValueError("update needs t >= 1 new tokens")
        first = max(0, t - w)                                               # older ones would be overwritten anyway
        p = self.seen + torch.arange(first, t, device=self.k_cache.device)  # (m,) absolute positions kept, m <= w
        slots = torch.remainder(p, w)                                       # distinct: m <= w consecutive positions
        self.k_cache.index_copy_(2, slots, k[:, :, first:].to(self.k_cache.dtype))
        self.v_cache.index_copy_(2, slots, v[:, :, first:].to(self.v_cache.dtype))
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
        B, H, w, hd = self.k_cache.shape
        t = q.shape[2]
        if t < 1 or q.dim() != 4 or k.shape[:3] != q.shape[:3] or v.shape[:3] != q.shape[:3]:
            raise ValueError("q, k and v must be (B, H, t, head_dim) with the same t >= 1")
        work = torch.promote_types(q.dtype, torch.float32)                  # half -> float32, once
        k_held, v_held = self.held()                                        # (B, H, n, hd), n = min(seen, w)
        n = k_held.shape[2]
        keys = torch.cat((k_held.to(work), k.to(work)), dim=2)              # (B, H, n + t, hd), positions seen - n ..
        values = torch.cat((v_held.to(work), v.to(work)), dim=2)            # (B, H, n + t, hd)
        # new token i sits at seen + i, the (n + i)-th of the n + t keys: the mask is bottom-right aligned
        out = _window_softmax_attend(q.to(work), keys, values, w).to(q.dtype)  # (B, H, t, hd)
        self.update(k, v)
        assert out.shape == (*q.shape[:3], v.shape[-1]) and out.dtype == q.dtype and n <= w
        return out

    def reset(self) -> None:
        """Forget every token: the next update starts a new sequence."""
        self.seen = 0
        self.k_cache.zero_()
        self.v_cache.zero_()

    def held(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(keys, values) held now, oldest first: (B, H, min(seen, window), head_dim) each (copies)."""
        w = self.window
        n = min(self.seen, w)
        # the n most recent positions seen - n .. seen - 1, oldest first, sit in slots (seen - n + r) mod w
        slots = torch.remainder(self.seen - n + torch.arange(n, device=self.k_cache.device), w)  # (n,)
        k_held = self.k_cache.index_select(2, slots)                        # (B, H, n, hd): a copy
        v_held = self.v_cache.index_select(2, slots)
        assert k_held.shape[2] == v_held.shape[2] == n
        return k_held, v_held
