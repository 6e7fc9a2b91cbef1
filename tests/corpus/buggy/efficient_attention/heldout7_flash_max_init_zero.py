"""Bug: flash_attention initialises the running max to 0 instead of -inf, so rows whose scores are all far below 0 underflow to 0 and return zeros.

Misconception: flash-max-init
Held out: yes
Source: https://github.com/Dao-AILab/flash-attention/issues/2082 and https://github.com/flashinfer-ai/flashinfer/issues/4267 (row max clamped to 0 / a finite sentinel zeroes whole heads); written from scratch
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def sdpa_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None = None,
                   is_causal: bool = False, dropout_p: float = 0.0, training: bool = False) -> torch.Tensor:
    """F.scaled_dot_product_attention with bottom-right causal masking and training-aware dropout."""
    assert not (is_causal and mask is not None), "pass either mask or is_causal=True, not both"
    if is_causal:
        L, S = query.shape[-2], key.shape[-2]
        mask = torch.ones(L, S, dtype=torch.bool, device=query.device).tril(S - L)
    return F.scaled_dot_product_attention(query, key, value, attn_mask=mask,
                                          dropout_p=dropout_p if training else 0.0)


def flash_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, is_causal: bool = False,
                    block_size: int = 64) -> torch.Tensor:
    """Tiled attention with an online softmax."""
    assert block_size >= 1, "block_size must be a positive integer"
    assert query.shape[-1] == key.shape[-1], "query and key must have the same last dim E"
    assert key.shape[-2] == value.shape[-2], "key and value must have the same length S"
    L, S = query.shape[-2], key.shape[-2]
    work = torch.float32 if query.dtype in (torch.float16, torch.bfloat16) else query.dtype
    scale = 1.0 / math.sqrt(query.shape[-1])
    q = query.to(work)
    row_max = torch.zeros(*query.shape[:-1], 1, dtype=work, device=query.device)  # running max
    row_sum = torch.zeros_like(row_max)
    out = torch.zeros(*query.shape[:-1], value.shape[-1], dtype=work, device=query.device)
    qi = torch.arange(L, device=query.device).unsqueeze(-1) + S - L
    for j in range(0, S, block_size):
        k = key[..., j:j + block_size, :].to(work)
        v = value[..., j:j + block_size, :].to(work)
        s = (q @ k.transpose(-1, -2)) * scale
        if is_causal:
            kj = torch.arange(j, j + k.shape[-2], device=query.device)
            s = s.masked_fill(kj.unsqueeze(0) > qi, float("-inf"))
        new_max = torch.maximum(row_max, s.amax(-1, keepdim=True))
        p = torch.exp(s - new_max)
        corr = torch.exp(row_max - new_max)
        row_sum = row_sum * corr + p.sum(-1, keepdim=True)
        out = out * corr + p @ v
        row_max = new_max
    out = out / row_sum.clamp_min(torch.finfo(work).tiny)
    return out.to(query.dtype)
