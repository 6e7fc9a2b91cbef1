"""Bug: flash_attention just calls F.scaled_dot_product_attention (banned inside flash_attention).

Misconception: banned-api
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
    return F.scaled_dot_product_attention(query, key, value, is_causal=is_causal)
