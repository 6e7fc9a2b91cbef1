# Generated from solutions/efficient_attention.py by `grader build`. Your task: replace each
# `raise NotImplementedError(...)` with working code. Keep the names and signatures.
"""Exercise `efficient_attention`: call PyTorch's fused attention correctly, then write FlashAttention yourself.

Part 1, `sdpa_attention`, wraps `F.scaled_dot_product_attention` (SDPA) and gets its three traps right:
- a boolean mask means **True = this query may attend to this key** (the inverse of nn.MultiheadAttention's
  `key_padding_mask`), while a float mask is *added* to the scores (0 = keep, -inf = block). A 0/1 float mask
  masks nothing: it adds +1 to the allowed scores;
- SDPA's own `is_causal=True` is *top-left* aligned when L != S. Here causal is *bottom-right* aligned: the L
  queries are the last L positions of the S keys (as in KV-cache decoding), so query i sits at absolute position
  S - L + i and may see keys 0 .. S - L + i;
- SDPA is a function and does not know about `model.train()`: dropout happens whenever `dropout_p > 0`, so pass
  `dropout_p if training else 0.0`.

Part 2, `flash_attention`, computes the same result as non-masked / causal SDPA without ever materialising the
L x S score matrix: it walks over the keys in tiles of `block_size` and keeps, per query row, a running max `m`,
a running softmax denominator `l` and an unnormalised output accumulator (the FlashAttention-2 recurrence).
F.scaled_dot_product_attention is not allowed inside `flash_attention`.

Shapes: query (..., L, E), key (..., S, E), value (..., S, Ev) -> output (..., L, Ev); usually (B, H, L, E).
The scale is 1/sqrt(E).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


class BottomRightCausalMask(nn.Module):
    """The future of bottom-right aligned causal attention, one block of keys at a time.

    Query i (of L) sits at absolute position S - L + i; key j is its future when j > S - L + i. For the keys
    [start, stop) forward returns the bool (L, stop - start) tensor that is True where the key is in the
    future (blocked), built with `torch.triu`.
    """

    def forward(self, num_queries: int, num_keys: int, start: int, stop: int,
                device: torch.device | None = None) -> torch.Tensor:
        # key start + c is blocked for query r when c - r >= num_keys - num_queries - start + 1
        ones = torch.ones(num_queries, stop - start, dtype=torch.bool, device=device)
        return torch.triu(ones, diagonal=num_keys - num_queries - start + 1)


class SDPAttention(nn.Module):
    """F.scaled_dot_product_attention with the pack's conventions; dropout follows `.train()` / `.eval()`."""

    def __init__(self, is_causal: bool = False, dropout_p: float = 0.0) -> None:
        super().__init__()
        self.is_causal: bool = is_causal
        self.dropout_p: float = dropout_p
        self.causal_mask = BottomRightCausalMask()

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        if self.is_causal:
            L, S = query.shape[-2], key.shape[-2]
            # SDPA's own is_causal is top-left aligned: pass the bottom-right keep-mask instead
            mask = ~self.causal_mask(L, S, 0, S, device=query.device)
        return F.scaled_dot_product_attention(query, key, value, attn_mask=mask,
                                              dropout_p=self.dropout_p if self.training else 0.0)

    def extra_repr(self) -> str:
        return f"is_causal={self.is_causal}, dropout_p={self.dropout_p}"


@dataclass
class OnlineSoftmaxState:
    """Running statistics of one online softmax, per query row: the max `m`, the denominator `denom` (the
    paper's `l`) and the unnormalised output `acc`."""

    m: torch.Tensor      # (..., L, 1), starts at -inf
    denom: torch.Tensor  # (..., L, 1), starts at 0
    acc: torch.Tensor    # (..., L, Ev), starts at 0

    @classmethod
    def empty(cls, rows: torch.Size, value_dim: int, dtype: torch.dtype,
              device: torch.device) -> OnlineSoftmaxState:
        return cls(m=torch.full((*rows, 1), float("-inf"), dtype=dtype, device=device),
                   denom=torch.zeros((*rows, 1), dtype=dtype, device=device),
                   acc=torch.zeros((*rows, value_dim), dtype=dtype, device=device))

    def update(self, scores: torch.Tensor, values: torch.Tensor) -> OnlineSoftmaxState:
        """Fold in one tile: scores (..., L, bs) (-inf where blocked) and its values (..., bs, Ev)."""
        # the max cancels out of acc / denom, so it is a constant for autograd
        m_new = torch.maximum(self.m, scores.amax(dim=-1, keepdim=True).detach())
        # a row that has seen only blocked keys keeps m = -inf: shift it by 0 so exp(-inf - 0) = 0, not NaN
        shift = m_new.masked_fill(torch.isneginf(m_new), 0.0)
        probs = torch.exp(scores - shift)              # (..., L, bs)
        rescale = torch.exp(self.m - shift)            # (..., L, 1): exp(m_old - m_new)
        return OnlineSoftmaxState(m=m_new,
                                  denom=rescale * self.denom + probs.sum(dim=-1, keepdim=True),
                                  acc=rescale * self.acc + probs @ values)

    def result(self) -> torch.Tensor:
        """acc / denom, divided once; rows that saw no key at all (denom == 0) give 0."""
        denom = torch.where(self.denom > 0, self.denom, torch.ones_like(self.denom))
        return self.acc / denom


class FlashAttention(nn.Module):
    """Exact attention computed over tiles of `block_size` keys with an online softmax (FlashAttention-2).

    Only (L, block_size) score tiles are ever built. Half-precision inputs are accumulated in float32.
    """

    def __init__(self, is_causal: bool = False, block_size: int = 64) -> None:
        super().__init__()
        self.is_causal: bool = is_causal
        self.block_size: int = block_size
        self.causal_mask = BottomRightCausalMask()

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        L, S = query.shape[-2], key.shape[-2]
        compute_dtype = torch.promote_types(query.dtype, torch.float32)
        q = query.to(dtype=compute_dtype) * (1.0 / math.sqrt(query.shape[-1]))   # (..., L, E), scale folded in
        state = OnlineSoftmaxState.empty(q.shape[:-1], value.shape[-1], compute_dtype, query.device)
        for start in range(0, S, self.block_size):
            stop = min(start + self.block_size, S)
            k_tile = key[..., start:stop, :].to(dtype=compute_dtype)             # (..., bs, E)
            v_tile = value[..., start:stop, :].to(dtype=compute_dtype)           # (..., bs, Ev)
            scores = q @ k_tile.transpose(-2, -1)                                 # (..., L, bs)
            if self.is_causal:
                future = self.causal_mask(L, S, start, stop, device=query.device)
                scores = scores.masked_fill(future, float("-inf"))
            state = state.update(scores, v_tile)
        return state.result().to(dtype=query.dtype)

    def extra_repr(self) -> str:
        return f"is_causal={self.is_causal}, block_size={self.block_size}"


def sdpa_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None = None,
                   is_causal: bool = False, dropout_p: float = 0.0, training: bool = False) -> torch.Tensor:
    """Attention through `F.scaled_dot_product_attention`, with the pack's conventions.

    Args:
        query: (B, H, L, E); key: (B, H, S, E); value: (B, H, S, Ev).
        mask: None, a bool tensor broadcastable to (B, H, L, S) with True = may attend, or a float tensor
            (same dtype as `query`) of 0 / -inf that is added to the scaled scores.
        is_causal: bottom-right aligned causal masking: query i (of L) may see keys 0 .. S - L + i. When
            L == S this is ordinary causal attention. Do not combine it with `mask`.
        dropout_p: dropout probability on the attention weights, applied only when `training` is True.
        training: whether the caller is in training mode.

    Returns:
        (B, H, L, Ev), the dtype of `query`.
    """
    assert not (is_causal and mask is not None), "pass either mask or is_causal=True, not both"
    return SDPAttention(is_causal=is_causal, dropout_p=dropout_p).train(training)(query, key, value, mask)


def flash_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, is_causal: bool = False,
                    block_size: int = 64) -> torch.Tensor:
    """Exact attention softmax(q k^T / sqrt(E)) v computed tile by tile with an online softmax.

    Args:
        query: (B, H, L, E); key: (B, H, S, E); value: (B, H, S, Ev) (any leading dims work).
        is_causal: bottom-right aligned causal masking, as in `sdpa_attention`. When L > S the first L - S
            query rows see no key at all: return 0 for them (as SDPA does), never NaN.
        block_size: number of keys per tile; any value >= 1 (the last tile may be shorter; block_size may
            exceed S).

    Returns:
        (B, H, L, Ev), the dtype of `query`. Never build an (L, S) tensor: only (L, block_size) tiles.
        Initialise the running max to -inf (not 0), the denominator and the accumulator to 0; after each
        tile rescale the old denominator and accumulator by exp(m_old - m_new); divide once at the end.
    """
    assert block_size >= 1, "block_size must be a positive integer"
    assert query.shape[-1] == key.shape[-1], "query and key must have the same last dim E"
    assert key.shape[-2] == value.shape[-2], "key and value must have the same length S"
    # query: (B, H, L, E); a tile of bs keys: key (B, H, bs, E), value (B, H, bs, Ev) -> scores (B, H, L, bs)
    # running max m and denominator: (B, H, L, 1); accumulator and output: (B, H, L, Ev)
    return FlashAttention(is_causal=is_causal, block_size=block_size)(query, key, value)
