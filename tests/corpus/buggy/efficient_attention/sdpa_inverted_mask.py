"""Bug: sdpa_attention passes ~mask, so True means 'blocked' (rasbt #1061 / misconception #7).

Misconception: mask-inverted
"""

import math

import torch
import torch.nn.functional as F


def sdpa_attention(query, key, value, mask=None, is_causal=False, dropout_p=0.0, training=False):
    L, S = query.shape[-2], key.shape[-2]
    if is_causal and L != S:
        mask = torch.ones(L, S, dtype=torch.bool, device=query.device).tril(diagonal=S - L)
        is_causal = False
    if mask is not None and mask.dtype == torch.bool:
        mask = ~mask  # thinks True = blocked, as in nn.MultiheadAttention
    return F.scaled_dot_product_attention(query, key, value, attn_mask=mask,
                                          dropout_p=dropout_p if training else 0.0, is_causal=is_causal)


def flash_attention(query, key, value, is_causal=False, block_size=64):
    L, S = query.shape[-2], key.shape[-2]
    q = query * (1.0 / math.sqrt(query.shape[-1]))
    m = torch.full((*query.shape[:-1], 1), float("-inf"), dtype=query.dtype)
    l = torch.zeros_like(m)
    acc = torch.zeros((*query.shape[:-1], value.shape[-1]), dtype=query.dtype)
    q_pos = torch.arange(L)[:, None] + (S - L)
    for start in range(0, S, block_size):
        end = min(start + block_size, S)
        s = q @ key[..., start:end, :].transpose(-2, -1)
        if is_causal:
            s = s.masked_fill(torch.arange(start, end) > q_pos, float("-inf"))
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        m_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(s - m_safe)
        alpha = torch.exp(m - m_safe)
        l = alpha * l + p.sum(dim=-1, keepdim=True)
        acc = alpha * acc + p @ value[..., start:end, :]
        m = m_new
    return acc / torch.where(l == 0, torch.ones_like(l), l)
