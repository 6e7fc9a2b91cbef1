"""Bug: banded_attention gives each block of queries only the keys of its own block (start .. end-1) instead of the band start - window + 1 .. end - 1, so the first window - 1 queries of every block after the first lose the keys of the previous block.

Misconception: band-range
Held out: yes
Source: classic learner slip (the band's look-back into the previous block forgotten); from the reference
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
    kv_len = seq_len if kv_len is None else kv_len
    q_pos = torch.arange(seq_len, device=device)[:, None] + (kv_len - seq_len)  # (L, 1): absolute positions
    k_pos = torch.arange(kv_len, device=device)[None, :]  # (1, S)
    behind = q_pos - k_pos  # (L, S): how far key j lies behind query i
    return (behind >= 0) & (behind < window)


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
    T = query.shape[-2]
    acc_dtype = torch.float32 if query.dtype in (torch.float16, torch.bfloat16) else query.dtype
    scale = 1.0 / math.sqrt(query.shape[-1])
    blocks = []
    for start in range(0, T, block_size):
        end = min(start + block_size, T)
        lo = start  # the block's keys
        q = query[..., start:end, :].to(acc_dtype)  # (B, H, bq, hd)
        scores = q @ key[..., lo:end, :].to(acc_dtype).transpose(-2, -1) * scale  # (B, H, bq, bk)
        # the block's queries are the last end - start of the band's end - lo positions: bottom-right aligned
        keep = sliding_window_mask(end - start, window, device=query.device, kv_len=end - lo)  # (bq, bk)
        weights = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)  # every row keeps its diagonal
        blocks.append(weights @ value[..., lo:end, :].to(acc_dtype))  # (B, H, bq, hdv)
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
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        self.window = window
        shape = (batch_size, num_heads, window, head_dim)
        self.register_buffer("k_cache", torch.zeros(shape, dtype=dtype, device=device))
        self.register_buffer("v_cache", torch.zeros(shape, dtype=dtype, device=device))
        self.seen = 0  # tokens written since the last reset; token p lives in slot p % window (a ring buffer)

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append t >= 1 new tokens' keys and values (each (B, H, t, head_dim)); keep only the last `window`.

        Returns:
            (k_all, v_all): the keys and values now held, oldest first, each (B, H, n, head_dim) with
            n = min(tokens seen since the last reset, window). Never return slots that were not written.
        """
        t = k.shape[-2]
        newest = min(t, self.window)  # of a chunk longer than the window, only its last `window` tokens survive
        positions = torch.arange(self.seen + t - newest, self.seen + t, device=self.k_cache.device)  # (newest,)
        slots = positions % self.window
        self.k_cache[..., slots, :] = k[..., t - newest:, :].to(self.k_cache.dtype)
        self.v_cache[..., slots, :] = v[..., t - newest:, :].to(self.v_cache.dtype)
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
        old_k, old_v = self.held()  # (B, H, n, hd): before this chunk is written
        keys = torch.cat([old_k, k.to(old_k.dtype)], dim=-2)  # (B, H, n + t, hd)
        values = torch.cat([old_v, v.to(old_v.dtype)], dim=-2)
        t, S = q.shape[-2], keys.shape[-2]
        acc_dtype = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype
        scores = q.to(acc_dtype) @ keys.to(acc_dtype).transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, t, S)
        keep = sliding_window_mask(t, self.window, device=q.device, kv_len=S)  # (t, S), bottom-right
        weights = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
        out = weights @ values.to(acc_dtype)  # (B, H, t, hd)
        self.update(k, v)
        return out.to(q.dtype)

    def reset(self) -> None:
        """Forget every token: the next update starts a new sequence."""
        self.k_cache.zero_()
        self.v_cache.zero_()
        self.seen = 0

    def held(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(keys, values) held now, oldest first: (B, H, min(seen, window), head_dim) each (copies)."""
        n = min(self.seen, self.window)
        order = torch.arange(self.seen - n, self.seen, device=self.k_cache.device) % self.window  # chronological
        return self.k_cache[..., order, :], self.v_cache[..., order, :]
