"""Bug: flash_attention calls SDPA bound at import time (`from torch.nn.functional import ...`), a ban dodge.

Misconception: banned-api
"""

from __future__ import annotations

import torch
from torch.nn.functional import scaled_dot_product_attention as sdpa


def sdpa_attention(query, key, value, mask=None, is_causal=False, dropout_p=0.0, training=False):
    L, S = query.size(-2), key.size(-2)
    if is_causal:
        mask = torch.ones(L, S, dtype=torch.bool, device=query.device).tril(diagonal=S - L)
    return sdpa(query, key, value, attn_mask=mask, dropout_p=dropout_p if training else 0.0)


def flash_attention(query, key, value, is_causal=False, block_size=64):
    L, S = query.size(-2), key.size(-2)
    mask = torch.ones(L, S, dtype=torch.bool, device=query.device).tril(diagonal=S - L) if is_causal else None
    return sdpa(query, key, value, attn_mask=mask)
