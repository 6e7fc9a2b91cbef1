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
import operator

import torch
from torch import nn


def _check_window(window: object) -> int:
    """Guard clause: a window is an integer >= 1 (ValueError otherwise, floats included)."""
    try:
        as_int = operator.index(window)
    except TypeError:
        raise ValueError(f"window must be an integer >= 1, got {window!r}") from None
    if isinstance(window, bool) or as_int < 1:
        raise ValueError(f"window must be an integer >= 1, got {window!r}")
    return as_int


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Half and bfloat16 inputs are computed in float32; float32 and float64 keep their own precision."""
    return torch.promote_types(dtype, torch.float32)


def _masked_softmax_attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor,
                           scale: float) -> torch.Tensor:
    """softmax(q k^T * scale, masked where keep is False) v, all in q's (compute) dtype. Every row of keep must
    hold at least one True (a sliding window always keeps the query's own position)."""
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale
    scores = scores.masked_fill(~keep, float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), v)


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
    if seq_len < 0:
        raise ValueError(f"seq_len must be >= 0, got {seq_len}")
    kv_len = seq_len if kv_len is None else kv_len
    if kv_len < seq_len:
        raise ValueError(f"kv_len ({kv_len}) must be >= seq_len ({seq_len}): the queries are the last keys")
    q_pos = torch.arange(kv_len - seq_len, kv_len, device=device)[:, None]       # (L, 1) absolute positions
    k_pos = torch.arange(kv_len, device=device)[None, :]                          # (1, S)
    return (k_pos <= q_pos) & (k_pos > q_pos - window)


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
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise ValueError("query, key and value must be (..., T, dim)")
    seq_len = query.shape[-2]
    if key.shape[-2] != seq_len or value.shape[-2] != seq_len:
        raise ValueError(f"self-attention needs as many keys and values as queries, got T = {seq_len}, "
                         f"{key.shape[-2]} and {value.shape[-2]}")
    if key.shape[-1] != query.shape[-1]:
        raise ValueError(f"query and key must share head_dim, got {query.shape[-1]} and {key.shape[-1]}")
    if seq_len == 0:
        return query.new_empty(*torch.broadcast_shapes(query.shape[:-2], value.shape[:-2]), 0, value.shape[-1])

    compute = _compute_dtype(query.dtype)
    scale = 1.0 / math.sqrt(query.shape[-1])
    blocks = []
    for start in range(0, seq_len, block_size):
        end = min(start + block_size, seq_len)
        band_start = max(0, start - window + 1)
        q_blk = query[..., start:end, :].to(compute)                              # (B, H, bq, hd)
        k_band = key[..., band_start:end, :].to(compute)                          # (B, H, bk, hd)
        v_band = value[..., band_start:end, :].to(compute)                        # (B, H, bk, hdv)
        # the block's queries are the last bq of the band's bk positions: a bottom-right aligned window
        keep = sliding_window_mask(end - start, window, device=query.device, kv_len=end - band_start)
        blocks.append(_masked_softmax_attend(q_blk, k_band, v_band, keep, scale))  # (B, H, bq, hdv)
    return torch.cat(blocks, dim=-2).to(query.dtype)


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
        self.window = _check_window(window)
        for name, value in (("batch_size", batch_size), ("num_heads", num_heads), ("head_dim", head_dim)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        self.batch_size, self.num_heads, self.head_dim = batch_size, num_heads, head_dim
        shape = (batch_size, num_heads, self.window, head_dim)
        # a ring buffer: the token at absolute position p lives in slot p % window
        self.register_buffer("k_cache", torch.zeros(shape, dtype=dtype, device=device))
        self.register_buffer("v_cache", torch.zeros(shape, dtype=dtype, device=device))
        self.seen = 0  # tokens written since the last reset

    def _check_chunk(self, name: str, t: torch.Tensor) -> int:
        expected = (self.batch_size, self.num_heads, self.head_dim)
        if t.dim() != 4 or (t.shape[0], t.shape[1], t.shape[3]) != expected:
            raise ValueError(f"{name} must be ({self.batch_size}, {self.num_heads}, t, {self.head_dim}), got "
                             f"{tuple(t.shape)}")
        if t.shape[2] < 1:
            raise ValueError(f"{name} must hold at least one token")
        return t.shape[2]

    def _held_slots(self) -> torch.Tensor:
        """Slots of the held tokens, oldest first."""
        held = min(self.seen, self.window)
        positions = torch.arange(self.seen - held, self.seen, device=self.k_cache.device)
        return positions % self.window

    @torch.no_grad()
    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append t >= 1 new tokens' keys and values (each (B, H, t, head_dim)); keep only the last `window`.

        Returns:
            (k_all, v_all): the keys and values now held, oldest first, each (B, H, n, head_dim) with
            n = min(tokens seen since the last reset, window). Never return slots that were not written.
        """
        t = self._check_chunk("k", k)
        if self._check_chunk("v", v) != t:
            raise ValueError(f"k and v must hold the same number of tokens, got {t} and {v.shape[2]}")
        kept = min(t, self.window)  # older tokens of a long chunk would be overwritten anyway
        positions = torch.arange(self.seen + t - kept, self.seen + t, device=self.k_cache.device)
        slots = positions % self.window                                           # distinct: kept <= window
        self.k_cache.index_copy_(2, slots, k[:, :, t - kept:].to(device=self.k_cache.device,
                                                                 dtype=self.k_cache.dtype))
        self.v_cache.index_copy_(2, slots, v[:, :, t - kept:].to(device=self.v_cache.device,
                                                                 dtype=self.v_cache.dtype))
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
        t = self._check_chunk("k", k)
        if self._check_chunk("v", v) != t or q.dim() != 4 or q.shape[:3] != k.shape[:3]:
            raise ValueError(f"q, k and v must each be (B, H, t, head_dim) with the same t, got {tuple(q.shape)}, "
                             f"{tuple(k.shape)} and {tuple(v.shape)}")
        if q.shape[-1] != k.shape[-1]:
            raise ValueError(f"q and k must share head_dim, got {q.shape[-1]} and {k.shape[-1]}")

        compute = _compute_dtype(q.dtype)
        k_held, v_held = self.held()                                              # (B, H, n, hd), oldest first
        keys = torch.cat((k_held.to(device=k.device, dtype=compute), k.to(compute)), dim=-2)    # (B, H, n + t, hd)
        values = torch.cat((v_held.to(device=v.device, dtype=compute), v.to(compute)), dim=-2)
        keep = sliding_window_mask(t, self.window, device=q.device, kv_len=keys.shape[-2])        # (t, n + t)
        out = _masked_softmax_attend(q.to(compute), keys, values, keep, 1.0 / math.sqrt(q.shape[-1]))
        self.update(k, v)
        return out.to(q.dtype)

    @torch.no_grad()
    def reset(self) -> None:
        """Forget every token: the next update starts a new sequence."""
        self.k_cache.zero_()
        self.v_cache.zero_()
        self.seen = 0

    def held(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(keys, values) held now, oldest first: (B, H, min(seen, window), head_dim) each (copies)."""
        slots = self._held_slots()
        return self.k_cache.index_select(2, slots), self.v_cache.index_select(2, slots)
