"""Bug: flash_attention divides each tile by its own sum and averages the tiles, without the running rescale (§2.7).

Misconception: flash-rescale
"""

import math

import torch
import torch.nn.functional as F


def sdpa_attention(query, key, value, mask=None, is_causal=False, dropout_p=0.0, training=False):
    L, S = query.shape[-2], key.shape[-2]
    if is_causal and L != S:
        mask = torch.ones(L, S, dtype=torch.bool, device=query.device).tril(diagonal=S - L)
        is_causal = False
    return F.scaled_dot_product_attention(query, key, value, attn_mask=mask,
                                          dropout_p=dropout_p if training else 0.0, is_causal=is_causal)


def flash_attention(query, key, value, is_causal=False, block_size=64):
    L, S = query.shape[-2], key.shape[-2]
    q = query * (1.0 / math.sqrt(query.shape[-1]))
    q_pos = torch.arange(L, device=query.device)[:, None] + (S - L)
    out = torch.zeros((*query.shape[:-1], value.shape[-1]), dtype=query.dtype, device=query.device)
    tiles = 0
    for start in range(0, S, block_size):
        end = min(start + block_size, S)
        s = q @ key[..., start:end, :].transpose(-2, -1)
        if is_causal:
            s = s.masked_fill(torch.arange(start, end, device=query.device) > q_pos, float("-inf"))
        p = torch.exp(s - s.amax(dim=-1, keepdim=True))
        out = out + (p / p.sum(dim=-1, keepdim=True)) @ value[..., start:end, :]
        tiles += 1
    return out / tiles
