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
    _check_window(window)
    S = seq_len if kv_len is None else kv_len
    pos = torch.arange(S - seq_len, S, device=device)[:, None]  # absolute position of each query
    key = torch.arange(S, device=device)[None, :]
    return (key <= pos) & (key > pos - window)


def _check_window(window: int) -> None:
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")


def _softmax_attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """softmax(q k^T / sqrt(hd), masked by keep) v, in q's (working) dtype."""
    scores = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])
    return torch.einsum("...qk,...kd->...qd", scores.masked_fill(~keep, float("-inf")).softmax(dim=-1), v)


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
    _check_window(window)
    T = query.shape[-2]
    work = torch.promote_types(query.dtype, torch.float32)
    outs = []
    for start in range(0, T, block_size):
        end = min(start + block_size, T)
        lo = max(0, start - window + 1)
        keep = sliding_window_mask(end - start, window, device=query.device, kv_len=end - lo)
        outs.append(_softmax_attend(query[..., start:end, :].to(work), key[..., lo:end, :].to(work),
                                    value[..., lo:end, :].to(work), keep).to(query.dtype))
    if not outs:
        return query.new_zeros(*query.shape[:-1], value.shape[-1])
    return torch.cat(outs, dim=-2)


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
        _check_window(window)
        shape = (batch_size, num_heads, window, head_dim)
        self.register_buffer("k_cache", torch.zeros(shape, dtype=dtype, device=device))
        self.register_buffer("v_cache", torch.zeros(shape, dtype=dtype, device=device))
        self.window = window
        self.seen = 0  # tokens since the last reset; the buffers hold the last min(seen, window), oldest first

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append t >= 1 new tokens' keys and values (each (B, H, t, head_dim)); keep only the last `window`.

        Returns:
            (k_all, v_all): the keys and values now held, oldest first, each (B, H, n, head_dim) with
            n = min(tokens seen since the last reset, window). Never return slots that were not written.
        """
        if k.shape != v.shape or k.dim() != 4 or k.shape[-2] < 1:
            raise ValueError(f"k and v must be (B, H, t >= 1, head_dim), got {tuple(k.shape)}, {tuple(v.shape)}")
        n = min(self.seen, self.window)
        for buf, new in ((self.k_cache, k), (self.v_cache, v)):  # roll: keep the newest `window`, oldest first
            kept = torch.cat((buf[:, :, :n], new.to(buf.dtype)), dim=2)[:, :, -self.window:]
            buf[:, :, :kept.shape[2]] = kept
        self.seen += k.shape[-2]
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
        t = q.shape[-2]
        held_k, held_v = self.held()
        work = torch.promote_types(q.dtype, torch.float32)
        keys = torch.cat((held_k.to(work), k.to(work)), dim=2)
        values = torch.cat((held_v.to(work), v.to(work)), dim=2)
        keep = sliding_window_mask(t, self.window, device=q.device, kv_len=keys.shape[2])
        out = _softmax_attend(q.to(work), keys, values, keep).to(q.dtype)
        self.update(k, v)
        return out

    def reset(self) -> None:
        """Forget every token: the next update starts a new sequence."""
        self.seen = 0

    def held(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(keys, values) held now, oldest first: (B, H, min(seen, window), head_dim) each (copies)."""
        n = min(self.seen, self.window)
        return self.k_cache[:, :, :n].clone(), self.v_cache[:, :, :n].clone()
