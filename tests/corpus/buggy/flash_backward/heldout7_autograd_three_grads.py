"""Bug: FlashAttentionFunction.backward returns only (dq, dk, dv) for a forward with five inputs, so autograd raises instead of returning gradients.

Misconception: function-grad-count
Held out: yes
Source: https://pytorch.org/docs/stable/notes/extending.html (a custom autograd.Function backward must return one gradient or None per forward input; the classic 'returned an incorrect number of gradients' error); written from scratch
"""

from __future__ import annotations

import math
from typing import Any

import torch


def _work_dtype(t: torch.Tensor) -> torch.dtype:
    return torch.float32 if t.dtype in (torch.float16, torch.bfloat16) else t.dtype


def _causal_block(scores: torch.Tensor, start: int, L: int, S: int) -> torch.Tensor:
    rows = torch.arange(L, device=scores.device).unsqueeze(1) + (S - L)
    cols = torch.arange(start, start + scores.shape[-1], device=scores.device).unsqueeze(0)
    return scores.masked_fill(cols > rows, float("-inf"))


def flash_forward(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, is_causal: bool = False,
                  block_size: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """Tiled attention with an online softmax; returns (out, lse)."""
    assert block_size >= 1, "block_size must be a positive integer"
    L, S = query.shape[-2], key.shape[-2]
    wd = _work_dtype(query)
    scale = 1.0 / math.sqrt(query.shape[-1])
    q = query.to(wd)
    m = torch.full(query.shape[:-1] + (1,), float("-inf"), dtype=wd, device=query.device)
    l = torch.zeros_like(m)
    o = torch.zeros(query.shape[:-1] + (value.shape[-1],), dtype=wd, device=query.device)
    for j in range(0, S, block_size):
        kb, vb = key[..., j:j + block_size, :].to(wd), value[..., j:j + block_size, :].to(wd)
        s = q @ kb.transpose(-2, -1) * scale
        if is_causal:
            s = _causal_block(s, j, L, S)
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        shift = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
        p = torch.exp(s - shift)
        a = torch.exp(m - shift)
        l = a * l + p.sum(dim=-1, keepdim=True)
        o = a * o + p @ vb
        m = m_new
    out = o / torch.where(l == 0, torch.ones_like(l), l)
    return out.to(query.dtype), (m + torch.log(l)).squeeze(-1)


def flash_attention_backward(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, out: torch.Tensor,
                             lse: torch.Tensor, grad_out: torch.Tensor, is_causal: bool = False,
                             block_size: int = 64) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """FlashAttention-2 backward from the saved O and lse."""
    assert block_size >= 1, "block_size must be a positive integer"
    L, S = query.shape[-2], key.shape[-2]
    wd = _work_dtype(query)
    scale = 1.0 / math.sqrt(query.shape[-1])
    q, do, o = query.to(wd), grad_out.to(wd), out.to(wd)
    lse_col = lse.to(wd).unsqueeze(-1)
    lse_col = torch.where(torch.isinf(lse_col), torch.zeros_like(lse_col), lse_col)
    D = (do * o).sum(dim=-1, keepdim=True)
    dq = torch.zeros_like(q)
    dks, dvs = [], []
    for j in range(0, S, block_size):
        kb, vb = key[..., j:j + block_size, :].to(wd), value[..., j:j + block_size, :].to(wd)
        s = q @ kb.transpose(-2, -1) * scale
        if is_causal:
            s = _causal_block(s, j, L, S)
        p = torch.exp(s - lse_col)
        dvs.append(p.transpose(-2, -1) @ do)
        dp = do @ vb.transpose(-2, -1)
        ds = p * (dp - D)
        dq += ds @ kb * scale
        dks.append(ds.transpose(-2, -1) @ q * scale)
    dk, dv = torch.cat(dks, dim=-2), torch.cat(dvs, dim=-2)
    return dq.to(query.dtype), dk.to(key.dtype), dv.to(value.dtype)


class FlashAttentionFunction(torch.autograd.Function):
    """softmax(q k^T / sqrt(E)) v with a hand-written FlashAttention-2 backward."""

    @staticmethod
    def forward(ctx: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, is_causal: bool = False,
                block_size: int = 64) -> torch.Tensor:
        out, lse = flash_forward(query, key, value, is_causal, block_size)
        ctx.save_for_backward(query, key, value, out, lse)
        ctx.is_causal = is_causal
        ctx.block_size = block_size
        return out

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        q, k, v, out, lse = ctx.saved_tensors
        grads = flash_attention_backward(q, k, v, out, lse, grad_out, ctx.is_causal, ctx.block_size)
        return grads  # dq, dk, dv


def flash_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, is_causal: bool = False,
                    block_size: int = 64) -> torch.Tensor:
    """Differentiable tiled attention."""
    result: torch.Tensor = FlashAttentionFunction.apply(query, key, value, is_causal, block_size)
    return result
