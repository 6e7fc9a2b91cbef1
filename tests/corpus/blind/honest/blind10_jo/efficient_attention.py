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


@dataclass
class _RunningSoftmax:
    """Per query row: running max m, denominator and unnormalised output acc (FlashAttention-2)."""

    m: torch.Tensor
    denom: torch.Tensor
    acc: torch.Tensor

    @classmethod
    def start(cls, n: int, rows: int, ev: int, dtype: torch.dtype, device: torch.device) -> _RunningSoftmax:
        return cls(m=torch.full((n, rows, 1), float("-inf"), dtype=dtype, device=device),
                   denom=torch.zeros(n, rows, 1, dtype=dtype, device=device),
                   acc=torch.zeros(n, rows, ev, dtype=dtype, device=device))

    def update(self, scores: torch.Tensor, values: torch.Tensor) -> None:
        """Fold in one tile: scores (n, rows, bs) (-inf = blocked), values (n, bs, ev)."""
        # the max only stabilises the exponentials and cancels out: no gradient through it
        m_new = torch.maximum(self.m, scores.detach().amax(dim=-1, keepdim=True))
        m_safe = torch.where(torch.isneginf(m_new), torch.zeros_like(m_new), m_new)  # rows with nothing seen yet
        p = torch.exp(scores - m_safe)
        rescale = torch.exp(self.m - m_safe)
        self.denom = rescale * self.denom + p.sum(dim=-1, keepdim=True)
        self.acc = rescale * self.acc + torch.bmm(p, values)
        self.m = m_new

    def finish(self) -> torch.Tensor:
        return self.acc / torch.where(self.denom > 0, self.denom, torch.ones_like(self.denom))


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
    L, S = query.shape[-2], key.shape[-2]
    attn_mask = mask
    if is_causal:
        rows = torch.arange(L, device=query.device)[:, None]
        cols = torch.arange(S, device=query.device)[None, :]
        attn_mask = cols <= rows + (S - L)  # bottom-right: query i sits at position S - L + i
    elif mask is not None and mask.dtype != torch.bool:
        attn_mask = mask.to(dtype=query.dtype)
    return F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask,
                                          dropout_p=dropout_p if training else 0.0)


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
    out_dtype = query.dtype
    work = torch.promote_types(out_dtype, torch.float32)
    *lead, L, E = query.shape
    S, Ev = key.shape[-2], value.shape[-1]
    q = query.reshape(-1, L, E).to(work)
    k = key.reshape(-1, S, E).to(work)
    v = value.reshape(-1, S, Ev).to(work)
    scale = 1.0 / math.sqrt(E)
    offset = S - L  # query i is at absolute position offset + i
    rows = torch.arange(L, device=q.device)[:, None]
    blocked = torch.full((), float("-inf"), dtype=work, device=q.device)

    state = _RunningSoftmax.start(q.shape[0], L, Ev, work, q.device)
    for start in range(0, S, block_size):
        stop = min(start + block_size, S)
        if is_causal and start > offset + L - 1:
            break  # no query sees this tile or any later one
        scores = torch.baddbmm(q.new_zeros(1, 1, 1), q, k[:, start:stop].transpose(1, 2), beta=0.0, alpha=scale)
        if is_causal:
            cols = torch.arange(start, stop, device=q.device)[None, :]
            scores = torch.where(cols <= rows + offset, scores, blocked)
        state.update(scores, v[:, start:stop])
    return state.finish().reshape(*lead, L, Ev).to(out_dtype)
