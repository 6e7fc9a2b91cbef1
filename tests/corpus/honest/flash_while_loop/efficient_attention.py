"""Honest (a while loop over the tiles; SDPA through a keyword-only call in sdpa_attention, where it is allowed)."""
import math

import torch
from torch.nn import functional


def sdpa_attention(query, key, value, mask=None, is_causal=False, dropout_p=0.0, training=False):
    L, S = query.size(-2), key.size(-2)
    if is_causal and L != S:
        mask, is_causal = torch.ones(L, S, dtype=torch.bool, device=query.device).tril(S - L), False
    return functional.scaled_dot_product_attention(query=query, key=key, value=value, attn_mask=mask,
                                                   dropout_p=dropout_p if training else 0.0, is_causal=is_causal)


def flash_attention(query, key, value, is_causal=False, block_size=64):
    L, S = query.shape[-2], key.shape[-2]
    work = torch.float32 if query.dtype in (torch.float16, torch.bfloat16) else query.dtype
    q = query.to(work) / math.sqrt(query.shape[-1])
    running_max = torch.full(q.shape[:-1] + (1,), -math.inf, dtype=work, device=q.device)
    total = torch.zeros_like(running_max)
    out = torch.zeros(q.shape[:-1] + (value.shape[-1],), dtype=work, device=q.device)
    rows = torch.arange(L, device=q.device).unsqueeze(-1) + (S - L)
    start = 0
    while start < S:
        stop = min(S, start + block_size)
        s = q @ key[..., start:stop, :].to(work).transpose(-2, -1)
        if is_causal:
            s = s.masked_fill(torch.arange(start, stop, device=q.device) > rows, -math.inf)
        new_max = torch.maximum(running_max, s.amax(-1, keepdim=True))
        shift = torch.where(new_max == -math.inf, torch.zeros_like(new_max), new_max)
        p = (s - shift).exp()
        decay = (running_max - shift).exp()
        total = total * decay + p.sum(-1, keepdim=True)
        out = out * decay + p @ value[..., start:stop, :].to(work)
        running_max = new_max
        start = stop
    return (out / total.masked_fill(total == 0, 1.0)).to(query.dtype)
