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
        raise ValueError(f"window must be at least 1, got {window}")
    if kv_len is None:
        kv_len = seq_len

    # the queries are the LAST seq_len of the kv_len positions (bottom-right alignment)
    offset = kv_len - seq_len
    query_pos = torch.arange(seq_len, device=device).unsqueeze(1) + offset     # (L, 1)
    key_pos = torch.arange(kv_len, device=device).unsqueeze(0)                 # (1, S)

    not_in_future = key_pos <= query_pos                      # causal: j <= p
    inside_window = key_pos >= query_pos - window + 1         # j >= p - window + 1
    mask = not_in_future & inside_window
    assert mask.shape == (seq_len, kv_len) and mask.dtype == torch.bool
    return mask


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
        raise ValueError(f"window must be at least 1, got {window}")
    assert query.shape[-2] == key.shape[-2] == value.shape[-2], "self-attention: q, k and v need the same length"
    assert query.shape[-1] == key.shape[-1], "query and key need the same head_dim"

    seq_len = query.shape[-2]
    scale = 1.0 / math.sqrt(query.shape[-1])
    compute_dtype = torch.promote_types(query.dtype, torch.float32)   # half -> float32

    block_outputs = []
    for start in range(0, seq_len, block_size):
        end = min(start + block_size, seq_len)                 # the last block may be shorter
        band_start = max(0, start - window + 1)                # first key any query of this block can see

        q_block = query[..., start:end, :].to(compute_dtype)           # (..., bq, hd)
        k_band = key[..., band_start:end, :].to(compute_dtype)         # (..., bk, hd), bk <= bq + window - 1
        v_band = value[..., band_start:end, :].to(compute_dtype)       # (..., bk, hdv)

        # the block's queries are the last (end - start) of the band's positions: a bottom-right aligned mask
        band_mask = sliding_window_mask(end - start, window, device=query.device, kv_len=end - band_start)

        scores = (q_block @ k_band.transpose(-2, -1)) * scale           # (..., bq, bk)
        scores = scores.masked_fill(~band_mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)                         # every row sees at least itself
        block_outputs.append((weights @ v_band).to(query.dtype))        # (..., bq, hdv)

    if len(block_outputs) == 0:
        return torch.zeros(*query.shape[:-1], value.shape[-1], dtype=query.dtype, device=query.device)
    output = torch.cat(block_outputs, dim=-2)
    assert output.shape == (*query.shape[:-1], value.shape[-1])
    return output


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
            raise ValueError(f"window must be at least 1, got {window}")
        self.window = window
        self.seen = 0          # tokens written since the last reset

        # a ring buffer: token p lives in slot p % window
        storage_shape = (batch_size, num_heads, window, head_dim)
        self.register_buffer("k_cache", torch.zeros(storage_shape, dtype=dtype, device=device))
        self.register_buffer("v_cache", torch.zeros(storage_shape, dtype=dtype, device=device))

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append t >= 1 new tokens' keys and values (each (B, H, t, head_dim)); keep only the last `window`.

        Returns:
            (k_all, v_all): the keys and values now held, oldest first, each (B, H, n, head_dim) with
            n = min(tokens seen since the last reset, window). Never return slots that were not written.
        """
        if k.shape != v.shape:
            raise ValueError(f"k and v must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}")
        if k.dim() != 4 or k.shape[2] < 1:
            raise ValueError(f"k and v must be (B, H, t >= 1, head_dim), got {tuple(k.shape)}")
        new_tokens = k.shape[2]

        # write token by token; only the last `window` of a long chunk survive, so skip the others
        first_kept = max(0, new_tokens - self.window)
        for i in range(first_kept, new_tokens):
            position = self.seen + i
            slot = position % self.window
            self.k_cache[:, :, slot] = k[:, :, i].to(self.k_cache.dtype)
            self.v_cache[:, :, slot] = v[:, :, i].to(self.v_cache.dtype)
        self.seen += new_tokens

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
        assert q.shape[2] == k.shape[2] == v.shape[2], "q, k and v must hold the same new tokens"
        new_tokens = q.shape[2]
        compute_dtype = torch.promote_types(q.dtype, torch.float32)

        # keys/values: the held ones (oldest first), then the chunk's own
        held_k, held_v = self.held()                                        # (B, H, n, hd)
        num_held = held_k.shape[2]
        all_k = torch.cat([held_k.to(compute_dtype), k.to(compute_dtype)], dim=2)   # (B, H, n + t, hd)
        all_v = torch.cat([held_v.to(compute_dtype), v.to(compute_dtype)], dim=2)

        # new token i sits at position seen + i; the held keys are positions seen - n .. seen - 1,
        # so a bottom-right aligned window mask over n + t keys is exactly right
        mask = sliding_window_mask(new_tokens, self.window, device=q.device, kv_len=num_held + new_tokens)

        scale = 1.0 / math.sqrt(q.shape[-1])
        scores = (q.to(compute_dtype) @ all_k.transpose(-2, -1)) * scale     # (B, H, t, n + t)
        scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        output = (weights @ all_v).to(q.dtype)                               # (B, H, t, hd)

        # only now remember the new tokens
        self.update(k, v)
        return output

    def reset(self) -> None:
        """Forget every token: the next update starts a new sequence."""
        self.seen = 0
        self.k_cache.zero_()
        self.v_cache.zero_()

    def held(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(keys, values) held now, oldest first: (B, H, min(seen, window), head_dim) each (copies)."""
        if self.seen <= self.window:
            # not wrapped yet: slots 0 .. seen - 1 are in order
            order = torch.arange(self.seen, device=self.k_cache.device)
        else:
            # wrapped: the oldest held token (position seen - window) is in slot seen % window
            oldest_slot = self.seen % self.window
            order = (torch.arange(self.window, device=self.k_cache.device) + oldest_slot) % self.window
        # advanced indexing returns copies
        keys = self.k_cache[:, :, order]
        values = self.v_cache[:, :, order]
        return keys, values
