"""SDPA, and tiled attention that carries a running log-sum-exp (ana)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def sdpa_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None = None,
                   is_causal: bool = False, dropout_p: float = 0.0, training: bool = False) -> torch.Tensor:
    assert not (is_causal and mask is not None), "pass either mask or is_causal=True, not both"
    n_q, n_k = query.size(-2), key.size(-2)
    if is_causal and n_q != n_k:
        rows = torch.arange(n_q, device=query.device)[:, None] + (n_k - n_q)
        mask = torch.arange(n_k, device=query.device)[None, :] <= rows
        is_causal = False
    p = dropout_p if training else 0.0
    return F.scaled_dot_product_attention(query, key, value, attn_mask=mask, dropout_p=p, is_causal=is_causal)


def flash_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, is_causal: bool = False,
                    block_size: int = 64) -> torch.Tensor:
    assert block_size >= 1, "block_size must be a positive integer"
    assert query.shape[-1] == key.shape[-1], "query and key must have the same last dim E"
    assert key.shape[-2] == value.shape[-2], "key and value must have the same length S"
    work = torch.promote_types(query.dtype, torch.float32)
    q = query.to(work) * query.size(-1) ** -0.5
    n_q, n_k = query.size(-2), key.size(-2)
    rows = torch.arange(n_q, device=query.device)[:, None] + (n_k - n_q)
    lse = torch.full((*query.shape[:-1], 1), float("-inf"), dtype=work, device=query.device)
    out = torch.zeros((*query.shape[:-1], value.size(-1)), dtype=work, device=query.device)
    cols = torch.arange(n_k, device=query.device)
    for k_blk, v_blk, pos in zip(key.split(block_size, -2), value.split(block_size, -2), cols.split(block_size)):
        s = q @ k_blk.to(work).mT
        if is_causal:
            s = s.masked_fill(pos[None, :] > rows, float("-inf"))
        blk = torch.logsumexp(s, dim=-1, keepdim=True)
        new = torch.logaddexp(lse, blk)
        p = torch.exp(s - blk).nan_to_num(0.0)
        out = out * torch.exp(lse - new).nan_to_num(0.0) + (p @ v_blk.to(work)) * torch.exp(blk - new).nan_to_num(0.0)
        lse = new
    return out.to(query.dtype)
