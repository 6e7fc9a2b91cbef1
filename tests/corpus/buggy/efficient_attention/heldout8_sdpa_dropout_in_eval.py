"""Bug: sdpa_attention passes dropout_p to F.scaled_dot_product_attention whatever `training` says, and the functional SDPA always applies dropout, so evaluation outputs are randomly dropped and rescaled when dropout_p > 0.

Misconception: dropout-in-eval
Held out: yes
Source: https://github.com/karpathy/nanoGPT/pull/240 ("don't dropout in eval mode": the flash path passed self.dropout to SDPA in eval too); written from scratch
"""

import math

import torch
import torch.nn.functional as F


def sdpa_attention(query, key, value, mask=None, is_causal=False, dropout_p=0.0, training=False):
    assert not (is_causal and mask is not None), "pass either mask or is_causal=True, not both"
    L, S = query.size(-2), key.size(-2)
    if is_causal:
        # bottom-right: query i is position S - L + i
        mask = torch.ones(L, S, dtype=torch.bool, device=query.device).tril(S - L)
    return F.scaled_dot_product_attention(query, key, value, attn_mask=mask, dropout_p=dropout_p)


def flash_attention(query, key, value, is_causal=False, block_size=64):
    assert block_size >= 1, "block_size must be a positive integer"
    assert query.shape[-1] == key.shape[-1], "query and key must have the same last dim E"
    assert key.shape[-2] == value.shape[-2], "key and value must have the same length S"
    orig_dtype = query.dtype
    q, k, v = query.float(), key.float(), value.float()
    if orig_dtype == torch.float64:
        q, k, v = query, key, value
    L, S = q.shape[-2], k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1])

    row_max = torch.full(q.shape[:-1] + (1,), -math.inf, dtype=q.dtype, device=q.device)
    row_sum = torch.zeros_like(row_max)
    out = torch.zeros(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype, device=q.device)
    qi = torch.arange(L, device=q.device).unsqueeze(1) + S - L

    for j in range(0, S, block_size):
        kj, vj = k[..., j:j + block_size, :], v[..., j:j + block_size, :]
        s = (q @ kj.transpose(-1, -2)) * scale
        if is_causal:
            kpos = torch.arange(j, j + kj.shape[-2], device=q.device).unsqueeze(0)
            s = s.masked_fill(kpos > qi, -math.inf)
        new_max = torch.maximum(row_max, s.max(dim=-1, keepdim=True).values)
        safe = torch.where(new_max == -math.inf, torch.zeros_like(new_max), new_max)
        p = torch.exp(s - safe)
        corr = torch.exp(row_max - safe)
        row_sum = row_sum * corr + p.sum(-1, keepdim=True)
        out = out * corr + p @ vj
        row_max = new_max

    row_sum = torch.where(row_sum == 0, torch.ones_like(row_sum), row_sum)
    return (out / row_sum).to(orig_dtype)
