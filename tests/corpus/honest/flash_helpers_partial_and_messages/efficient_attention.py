"""Honest (small helpers, functools.partial, and messages and comments that name the banned API).

Do not call F.scaled_dot_product_attention inside flash_attention: it is banned there.
"""
import functools
import math

import torch
import torch.nn.functional as F

NOT_HERE = "flash_attention must not call F.scaled_dot_product_attention (torch._C._nn.scaled_dot_product_attention)"


def sdpa_attention(query, key, value, mask=None, is_causal=False, dropout_p=0.0, training=False):
    assert not (is_causal and mask is not None), "pass either mask or is_causal=True, not both"
    L, S = query.shape[-2], key.shape[-2]
    if is_causal and L != S:
        mask, is_causal = torch.ones(L, S, dtype=torch.bool, device=query.device).tril(diagonal=S - L), False
    return F.scaled_dot_product_attention(query, key, value, attn_mask=mask, is_causal=is_causal,
                                          dropout_p=dropout_p if training else 0.0)


def _tile_scores(q, k_tile, start, q_pos, causal):
    scores = q @ k_tile.transpose(-2, -1)
    if causal:
        keys = torch.arange(start, start + k_tile.shape[-2], device=q.device)
        scores = scores.masked_fill(keys > q_pos, float("-inf"))
    return scores


_zeros_like = functools.partial(torch.zeros_like)


def flash_attention(query, key, value, is_causal=False, block_size=64):
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1 ({NOT_HERE})")
    # (a comment: F.scaled_dot_product_attention(query, key, value) would do this in one call, but not here)
    L, S = query.shape[-2], key.shape[-2]
    acc_t = torch.float32 if query.dtype in (torch.float16, torch.bfloat16) else query.dtype
    q = query.to(acc_t) * (1.0 / math.sqrt(query.shape[-1]))
    m = torch.full((*query.shape[:-1], 1), float("-inf"), dtype=acc_t, device=query.device)
    den = _zeros_like(m)
    acc = torch.zeros((*query.shape[:-1], value.shape[-1]), dtype=acc_t, device=query.device)
    q_pos = torch.arange(L, device=query.device)[:, None] + (S - L)
    for start in range(0, S, block_size):
        k_tile, v_tile = (t[..., start:start + block_size, :].to(acc_t) for t in (key, value))
        s = _tile_scores(q, k_tile, start, q_pos, is_causal)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        safe = torch.nan_to_num(m_new, neginf=0.0)
        p, alpha = torch.exp(s - safe), torch.exp(m - safe)
        den, acc, m = alpha * den + p.sum(-1, keepdim=True), alpha * acc + p @ v_tile, m_new
    return (acc / torch.where(den == 0, torch.ones_like(den), den)).to(query.dtype)
