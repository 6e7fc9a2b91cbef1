"""SDPA, and tiled attention with torch.where guards (chen)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def sdpa_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None = None,
                   is_causal: bool = False, dropout_p: float = 0.0, training: bool = False) -> torch.Tensor:
    assert not (is_causal and mask is not None), "pass either mask or is_causal=True, not both"
    lq, lk = query.shape[-2], key.shape[-2]
    if is_causal and lq != lk:
        return F.scaled_dot_product_attention(
            query, key, value, attn_mask=torch.ones(lq, lk, dtype=torch.bool, device=query.device).tril(lk - lq),
            dropout_p=dropout_p * training)
    return F.scaled_dot_product_attention(query, key, value, mask, dropout_p * training, is_causal)


def flash_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, is_causal: bool = False,
                    block_size: int = 64) -> torch.Tensor:
    assert block_size >= 1, "block_size must be a positive integer"
    assert query.shape[-1] == key.shape[-1], "query and key must have the same last dim E"
    assert key.shape[-2] == value.shape[-2], "key and value must have the same length S"
    dt = torch.float32 if query.element_size() < 4 else query.dtype
    lq, lk = query.shape[-2], key.shape[-2]
    q = query.to(dt) / math.sqrt(query.shape[-1])
    mx = q.new_full((*q.shape[:-1], 1), -math.inf)
    den = q.new_zeros((*q.shape[:-1], 1))
    num = q.new_zeros((*q.shape[:-1], value.shape[-1]))
    for j in range(0, lk, block_size):
        s = q @ key[..., j:j + block_size, :].to(dt).mT
        if is_causal:
            kj = torch.arange(j, j + s.shape[-1], device=q.device)
            s = torch.where(kj > torch.arange(lq, device=q.device)[:, None] + lk - lq, -math.inf, s)
        top = torch.maximum(mx, s.amax(-1, keepdim=True))
        base = torch.where(top.isinf(), 0.0, top)
        e = (s - base).exp()
        den = den * (mx - base).exp() + e.sum(-1, keepdim=True)
        num = num * (mx - base).exp() + e @ value[..., j:j + block_size, :].to(dt)
        mx = top
    return (num / torch.where(den > 0, den, 1.0)).to(query.dtype)
