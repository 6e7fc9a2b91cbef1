"""Bug: flash_attention initialises the running max m to 0 instead of -inf, so when every score of a row is far below 0 all exp(s - 0) underflow and the row comes out as zeros (or wrong) instead of the softmax average.

Misconception: flash-max-init
Held out: yes
Source: https://github.com/Dao-AILab/flash-attention/issues/2082 (row max stuck at 0.0 when all later scores are negative zeroes whole heads); from the reference
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
    if is_causal and L != S:
        # SDPA's is_causal would be top-left aligned (query i sees keys 0..i): build the bottom-right mask.
        mask = torch.ones(L, S, dtype=torch.bool, device=query.device).tril(diagonal=S - L)  # (L, S)
        is_causal = False
    return F.scaled_dot_product_attention(query, key, value, attn_mask=mask,
                                          dropout_p=dropout_p if training else 0.0, is_causal=is_causal)


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
    # Half precision inputs: accumulate in float32, cast back at the end.
    acc_dtype = torch.float32 if query.dtype in (torch.float16, torch.bfloat16) else query.dtype
    q = query.to(acc_dtype) * (1.0 / math.sqrt(query.shape[-1]))  # (B, H, L, E), scale folded into q
    m = torch.zeros((*query.shape[:-1], 1), dtype=acc_dtype, device=query.device)  # (B, H, L, 1)
    denom = torch.zeros_like(m)  # (B, H, L, 1)
    acc = torch.zeros((*query.shape[:-1], value.shape[-1]), dtype=acc_dtype, device=query.device)  # (B, H, L, Ev)
    q_pos = torch.arange(L, device=query.device)[:, None] + (S - L)  # (L, 1): absolute position of each query

    for start in range(0, S, block_size):
        end = min(start + block_size, S)  # the last tile may be shorter
        k_tile = key[..., start:end, :].to(acc_dtype)  # (B, H, bs, E)
        v_tile = value[..., start:end, :].to(acc_dtype)  # (B, H, bs, Ev)
        scores = q @ k_tile.transpose(-2, -1)  # (B, H, L, bs)
        if is_causal:
            k_pos = torch.arange(start, end, device=query.device)  # (bs,)
            scores = scores.masked_fill(k_pos > q_pos, float("-inf"))  # (L, bs) mask broadcasts
        m_new = torch.maximum(m, scores.amax(dim=-1, keepdim=True))  # (B, H, L, 1)
        # A row that has seen only masked keys so far has m_new = -inf; exp(-inf - (-inf)) would be NaN.
        m_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)  # (B, H, L, 1)
        p = torch.exp(scores - m_safe)  # (B, H, L, bs), masked entries become 0
        alpha = torch.exp(m - m_safe)  # (B, H, L, 1): rescales the old statistics (0 on the first tile)
        denom = alpha * denom + p.sum(dim=-1, keepdim=True)
        acc = alpha * acc + p @ v_tile
        m = m_new

    # Rows that saw no key at all (causal with L > S) have denom 0 and acc 0: return 0 there, like SDPA.
    out = acc / torch.where(denom == 0, torch.ones_like(denom), denom)  # (B, H, L, Ev)
    return out.to(query.dtype)
