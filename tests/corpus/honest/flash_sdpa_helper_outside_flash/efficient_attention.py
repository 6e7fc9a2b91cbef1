"""Honest (SDPA wrapped in a module-level helper that only sdpa_attention calls; flash has its own helpers)."""
import math

import torch
import torch.nn.functional as F

sdpa = F.scaled_dot_product_attention  # an alias at module level: used only by sdpa_attention


def _bottom_right(L, S, device):
    return torch.ones(L, S, dtype=torch.bool, device=device).tril(diagonal=S - L)


def _call_sdpa(q, k, v, mask, causal, p):
    return sdpa(q, k, v, attn_mask=mask, dropout_p=p, is_causal=causal)


def sdpa_attention(query, key, value, mask=None, is_causal=False, dropout_p=0.0, training=False):
    L, S = query.shape[-2], key.shape[-2]
    if is_causal and L != S:
        return _call_sdpa(query, key, value, _bottom_right(L, S, query.device), False, dropout_p if training else 0.0)
    return _call_sdpa(query, key, value, mask, is_causal, dropout_p if training else 0.0)


def flash_attention(query, key, value, is_causal=False, block_size=64):
    L, S = query.shape[-2], key.shape[-2]
    dt = torch.float32 if query.dtype in (torch.float16, torch.bfloat16) else query.dtype
    q = query.to(dt) / math.sqrt(query.shape[-1])
    m = q.new_full((*q.shape[:-1], 1), float("-inf"))
    l = q.new_zeros((*q.shape[:-1], 1))  # noqa: E741
    o = q.new_zeros((*q.shape[:-1], value.shape[-1]))
    for j in range(0, S, block_size):
        s = q @ key[..., j:j + block_size, :].to(dt).transpose(-2, -1)
        if is_causal:  # the tile's own part of the bottom-right mask: never all L x S of it
            keys = torch.arange(j, min(j + block_size, S), device=query.device)
            s = s.masked_fill(keys[None, :] > torch.arange(L, device=query.device)[:, None] + (S - L), float("-inf"))
        m2 = torch.maximum(m, s.amax(-1, keepdim=True))
        base = m2.masked_fill(m2 == float("-inf"), 0.0)
        p = (s - base).exp()
        a = (m - base).exp()
        l, o, m = a * l + p.sum(-1, keepdim=True), a * o + p @ value[..., j:j + block_size, :].to(dt), m2  # noqa: E741
    return (o / l.masked_fill(l == 0, 1.0)).to(query.dtype)
