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

import torch
import torch.nn.functional as F


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
        # bottom-right: query i is token S - L + i, so it keeps keys j <= i + (S - L)
        attn_mask = torch.ones(L, S, dtype=torch.bool, device=query.device)
        attn_mask.tril_(diagonal=S - L)
    elif mask is not None and mask.dtype != torch.bool and mask.dtype != query.dtype:
        attn_mask = mask.to(query.dtype)
    p = dropout_p if training else 0.0
    return F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, dropout_p=p)


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
    L, E = query.shape[-2], query.shape[-1]
    S, Ev = key.shape[-2], value.shape[-1]
    lead = query.shape[:-2]
    acc_dtype = torch.float32 if query.dtype in (torch.float16, torch.bfloat16) else query.dtype
    q_all = query.to(acc_dtype)
    k_all = key.to(acc_dtype)
    v_all = value.to(acc_dtype)
    scale = 1.0 / math.sqrt(E)
    shift = S - L  # query i sits at absolute position shift + i
    neg_inf = float("-inf")
    q_rows = max(block_size, 128)  # queries handled together (only limits Python overhead)

    out = q_all.new_empty(*lead, L, Ev)
    for i0 in range(0, L, q_rows):
        i1 = min(i0 + q_rows, L)
        q_blk = q_all[..., i0:i1, :]
        m = q_all.new_full((*lead, i1 - i0, 1), neg_inf)
        denom = q_all.new_zeros((*lead, i1 - i0, 1))
        acc = q_all.new_zeros((*lead, i1 - i0, Ev))

        key_end = S
        if is_causal:
            key_end = max(0, min(S, shift + i1))  # the last row of the block sees keys < shift + i1
        for j0 in range(0, key_end, block_size):
            j1 = min(j0 + block_size, S)
            s = q_blk @ k_all[..., j0:j1, :].transpose(-2, -1)  # (..., rows, bs): one tile, a fresh tensor
            s.mul_(scale)
            if is_causal and j1 - 1 > shift + i0:  # part of this tile is in some row's future
                rows = torch.arange(i0, i1, device=s.device).unsqueeze(1)
                cols = torch.arange(j0, j1, device=s.device).unsqueeze(0)
                s.masked_fill_(cols - rows > shift, neg_inf)
            m_new = torch.maximum(m, s.detach().amax(dim=-1, keepdim=True))
            m_use = m_new.masked_fill(m_new == neg_inf, 0.0)  # rows that have seen no key yet
            correction = (m - m_use).exp_()  # rescales what was accumulated under the old max
            s.sub_(m_use).exp_()  # s now holds the tile's unnormalised probabilities; autograd keeps it
            denom.mul_(correction).add_(s.sum(dim=-1, keepdim=True))
            acc.mul_(correction).add_(s @ v_all[..., j0:j1, :])
            m = m_new
        denom_safe = denom.masked_fill(denom == 0, 1.0)  # rows that see no key at all give 0
        out[..., i0:i1, :] = acc / denom_safe
    return out.to(query.dtype)
