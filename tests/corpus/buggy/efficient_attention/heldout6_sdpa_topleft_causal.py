"""Bug: sdpa_attention forwards is_causal to SDPA, whose causal mask is top-left aligned, so when L != S queries see too few keys.

Misconception: mask-top-left
Held out: yes
Source: pitfall: SDPA is_causal alignment with L != S; written from scratch
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
    L = query.size(-2)
    S = key.size(-2)
    p = dropout_p if training else 0.0
    return F.scaled_dot_product_attention(query, key, value, attn_mask=mask, dropout_p=p, is_causal=is_causal)


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
    L, S = query.shape[-2], key.shape[-2]
    dt = torch.float32 if query.dtype in (torch.float16, torch.bfloat16) else query.dtype
    scale = 1 / math.sqrt(query.shape[-1])
    q = query.to(dt)
    m_i = torch.full(query.shape[:-1] + (1,), -math.inf, dtype=dt, device=query.device)
    l_i = torch.zeros_like(m_i)
    o_i = torch.zeros(query.shape[:-1] + (value.shape[-1],), dtype=dt, device=query.device)
    rows = torch.arange(L, device=query.device).unsqueeze(1) + S - L
    for j in range(0, S, block_size):
        kj = key[..., j:j + block_size, :].to(dt)
        vj = value[..., j:j + block_size, :].to(dt)
        s = (q @ kj.transpose(-1, -2)) * scale
        if is_causal:
            cols = torch.arange(j, j + kj.shape[-2], device=query.device).unsqueeze(0)
            s = s.masked_fill(cols > rows, -math.inf)
        m_new = torch.maximum(m_i, s.max(dim=-1, keepdim=True).values)
        m_use = torch.where(m_new == -math.inf, torch.zeros_like(m_new), m_new)
        p = torch.exp(s - m_use)
        corr = torch.exp(m_i - m_use)
        l_i = l_i * corr + p.sum(dim=-1, keepdim=True)
        o_i = o_i * corr + p @ vj
        m_i = m_new
    l_safe = torch.where(l_i == 0, torch.ones_like(l_i), l_i)
    return (o_i / l_safe).to(query.dtype)
