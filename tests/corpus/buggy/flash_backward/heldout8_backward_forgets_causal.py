"""Bug: FlashAttentionFunction keeps block_size on ctx but not is_causal, so its backward recomputes the tiles WITHOUT the causal mask (exp(s - lse) over keys the forward never saw): causal gradients are wrong while the forward and all non-causal gradients are right.

Misconception: mask-missing
Held out: yes
Source: https://github.com/triton-lang/triton/issues/4541 (fused-attention tutorial: the backward kernel ignores ctx.causal entirely); written from scratch
"""

import math

import torch


def _work_dtype(t):
    return torch.float32 if t.dtype in (torch.float16, torch.bfloat16) else t.dtype


def flash_forward(query, key, value, is_causal=False, block_size=64):
    assert block_size >= 1, "block_size must be a positive integer"
    wd = _work_dtype(query)
    q = query.to(wd)
    L, S, E = q.shape[-2], key.shape[-2], q.shape[-1]
    scale = 1.0 / math.sqrt(E)
    m = torch.full(q.shape[:-1], float("-inf"), dtype=wd, device=q.device)  # (B, H, L)
    l = torch.zeros_like(m)
    o = torch.zeros(*q.shape[:-1], value.shape[-1], dtype=wd, device=q.device)
    rows = torch.arange(L, device=q.device) + (S - L)
    for j0 in range(0, S, block_size):
        j1 = min(S, j0 + block_size)
        s = q @ key[..., j0:j1, :].to(wd).transpose(-1, -2) * scale
        if is_causal:
            cols = torch.arange(j0, j1, device=q.device)
            s = s.masked_fill(cols[None, :] > rows[:, None], float("-inf"))
        m_new = torch.maximum(m, s.amax(-1))
        m_use = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(s - m_use[..., None])
        a = torch.exp(m - m_use)
        l = a * l + p.sum(-1)
        o = a[..., None] * o + p @ value[..., j0:j1, :].to(wd)
        m = m_new
    out = o / torch.where(l == 0, torch.ones_like(l), l)[..., None]
    lse = m + torch.log(l)
    return out.to(query.dtype), lse


def flash_attention_backward(query, key, value, out, lse, grad_out, is_causal=False, block_size=64):
    assert block_size >= 1, "block_size must be a positive integer"
    wd = _work_dtype(query)
    q, do, o = query.to(wd), grad_out.to(wd), out.to(wd)
    L, S, E = q.shape[-2], key.shape[-2], q.shape[-1]
    scale = 1.0 / math.sqrt(E)
    lse_ = lse.to(wd)
    lse_ = torch.where(torch.isinf(lse_), torch.zeros_like(lse_), lse_)[..., None]
    D = (do * o).sum(-1, keepdim=True)
    rows = torch.arange(L, device=q.device) + (S - L)
    dq = torch.zeros_like(q)
    dks, dvs = [], []
    for j0 in range(0, S, block_size):
        j1 = min(S, j0 + block_size)
        kj, vj = key[..., j0:j1, :].to(wd), value[..., j0:j1, :].to(wd)
        s = q @ kj.transpose(-1, -2) * scale
        if is_causal:
            cols = torch.arange(j0, j1, device=q.device)
            s = s.masked_fill(cols[None, :] > rows[:, None], float("-inf"))
        p = torch.exp(s - lse_)
        dvs.append(p.transpose(-1, -2) @ do)
        dp = do @ vj.transpose(-1, -2)
        ds = p * (dp - D)
        dq += ds @ kj * scale
        dks.append(ds.transpose(-1, -2) @ q * scale)
    return dq.to(query.dtype), torch.cat(dks, -2).to(key.dtype), torch.cat(dvs, -2).to(value.dtype)


class FlashAttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, query, key, value, is_causal=False, block_size=64):
        out, lse = flash_forward(query, key, value, is_causal, block_size)
        ctx.save_for_backward(query, key, value, out, lse)
        ctx.block_size = block_size
        return out

    @staticmethod
    def backward(ctx, grad_out):
        query, key, value, out, lse = ctx.saved_tensors
        dq, dk, dv = flash_attention_backward(query, key, value, out, lse, grad_out, block_size=ctx.block_size)
        return dq, dk, dv, None, None


def flash_attention(query, key, value, is_causal=False, block_size=64):
    return FlashAttentionFunction.apply(query, key, value, is_causal, block_size)
