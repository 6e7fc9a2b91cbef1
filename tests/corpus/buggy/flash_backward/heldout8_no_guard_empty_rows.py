"""Bug: the backward rebuilds P = exp(scores - lse) without replacing lse = -inf, so for causal L > S the rows that see no key give exp(-inf + inf) = NaN and poison dQ, dK and dV.

Misconception: fully-masked-nan
Held out: yes
Source: https://github.com/Dao-AILab/flash-attention/issues/443 (flash v2 backward returns NaN gradients for causal with seqlen_q > seqlen_k); from the reference
"""

from __future__ import annotations

import math
from typing import Any

import torch


def flash_forward(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, is_causal: bool = False,
                  block_size: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """Tiled attention with an online softmax (as in the first assignment) that also returns the log-sum-exp.

    Returns:
        (out, lse): out (B, H, L, Ev) in query's dtype; lse (B, H, L), lse_i = m_i + log l_i from the FINAL running
        max m and denominator l (after the last tile), in float32 for half inputs, else query's dtype.
    """
    assert block_size >= 1, "block_size must be a positive integer"
    # a tile of bs keys: scores and probabilities (B, H, L, bs); running max m and denominator l (B, H, L, 1);
    # accumulator (B, H, L, Ev)
    L, S = query.shape[-2], key.shape[-2]
    acc_dtype = torch.float32 if query.dtype in (torch.float16, torch.bfloat16) else query.dtype
    q = query.to(acc_dtype) * (1.0 / math.sqrt(query.shape[-1]))  # (B, H, L, E), the scale folded into q
    m = torch.full((*query.shape[:-1], 1), float("-inf"), dtype=acc_dtype, device=query.device)  # (B, H, L, 1)
    denom = torch.zeros_like(m)
    acc = torch.zeros((*query.shape[:-1], value.shape[-1]), dtype=acc_dtype, device=query.device)
    q_pos = torch.arange(L, device=query.device)[:, None] + (S - L)  # (L, 1): absolute query positions
    for start in range(0, S, block_size):
        end = min(start + block_size, S)
        scores = q @ key[..., start:end, :].to(acc_dtype).transpose(-2, -1)  # (B, H, L, bs)
        if is_causal:
            scores = scores.masked_fill(torch.arange(start, end, device=query.device) > q_pos, float("-inf"))
        m_new = torch.maximum(m, scores.amax(dim=-1, keepdim=True))
        m_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)  # a row with no key yet: no NaN
        p = torch.exp(scores - m_safe)
        alpha = torch.exp(m - m_safe)
        denom = alpha * denom + p.sum(dim=-1, keepdim=True)
        acc = alpha * acc + p @ value[..., start:end, :].to(acc_dtype)
        m = m_new
    out = acc / torch.where(denom == 0, torch.ones_like(denom), denom)  # rows without keys: 0
    lse = (m + torch.log(denom)).squeeze(-1)  # rows without keys: -inf + log 0 = -inf
    return out.to(query.dtype), lse


def flash_attention_backward(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, out: torch.Tensor,
                             lse: torch.Tensor, grad_out: torch.Tensor, is_causal: bool = False,
                             block_size: int = 64) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """FlashAttention-2's backward: the gradients of the inputs from the saved O and lse, tile by tile.

    Args:
        query, key, value: the forward's inputs; out (B, H, L, Ev) and lse (B, H, L): what flash_forward returned;
        grad_out: dO, the gradient of the loss with respect to out, (B, H, L, Ev).
        is_causal, block_size: as in the forward.

    Returns:
        (dq, dk, dv), shaped and typed like query, key and value. Rebuild each tile's probabilities as
        exp(scores - lse) (rows with lse = -inf have no key: their probabilities are 0); never build (L, S).
    """
    assert block_size >= 1, "block_size must be a positive integer"
    # D: (B, H, L, 1); a tile of bs keys: P, dP, dS (B, H, L, bs); dK_j (B, H, bs, E), dV_j (B, H, bs, Ev)
    L, S = query.shape[-2], key.shape[-2]
    acc_dtype = torch.float32 if query.dtype in (torch.float16, torch.bfloat16) else query.dtype
    scale = 1.0 / math.sqrt(query.shape[-1])
    q, do = query.to(acc_dtype), grad_out.to(acc_dtype)
    row_lse = lse.to(acc_dtype).unsqueeze(-1)  # (B, H, L, 1)
    d = (do * out.to(acc_dtype)).sum(dim=-1, keepdim=True)  # (B, H, L, 1)
    q_pos = torch.arange(L, device=query.device)[:, None] + (S - L)  # (L, 1)
    dq = torch.zeros_like(q)
    dk_tiles, dv_tiles = [], []
    for start in range(0, S, block_size):
        end = min(start + block_size, S)
        k_tile, v_tile = key[..., start:end, :].to(acc_dtype), value[..., start:end, :].to(acc_dtype)
        scores = (q @ k_tile.transpose(-2, -1)) * scale  # (B, H, L, bs)
        if is_causal:
            scores = scores.masked_fill(torch.arange(start, end, device=query.device) > q_pos, float("-inf"))
        p = torch.exp(scores - row_lse)  # the forward's probabilities, exactly
        dv_tiles.append(p.transpose(-2, -1) @ do)  # (B, H, bs, Ev)
        ds = p * (do @ v_tile.transpose(-2, -1) - d)  # (B, H, L, bs)
        dq = dq + (ds @ k_tile) * scale
        dk_tiles.append((ds.transpose(-2, -1) @ q) * scale)  # (B, H, bs, E)
    dk, dv = torch.cat(dk_tiles, dim=-2), torch.cat(dv_tiles, dim=-2)
    return dq.to(query.dtype), dk.to(key.dtype), dv.to(value.dtype)


class FlashAttentionFunction(torch.autograd.Function):
    """softmax(q k^T / sqrt(E)) v with a hand-written FlashAttention-2 backward."""

    @staticmethod
    def forward(ctx: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, is_causal: bool = False,
                block_size: int = 64) -> torch.Tensor:
        """Run flash_forward; save q, k, v, out and lse (nothing else) with ctx.save_for_backward; return out."""
        out, lse = flash_forward(query, key, value, is_causal, block_size)
        ctx.save_for_backward(query, key, value, out, lse)
        ctx.is_causal, ctx.block_size = is_causal, block_size  # plain Python values go on ctx itself
        return out

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        """One gradient per forward argument: (dq, dk, dv, None, None) from flash_attention_backward."""
        query, key, value, out, lse = ctx.saved_tensors
        dq, dk, dv = flash_attention_backward(query, key, value, out, lse, grad_out, ctx.is_causal, ctx.block_size)
        return dq, dk, dv, None, None


def flash_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, is_causal: bool = False,
                    block_size: int = 64) -> torch.Tensor:
    """Attention through FlashAttentionFunction: (B, H, L, Ev) in query's dtype, differentiable in q, k, v."""
    out: torch.Tensor = FlashAttentionFunction.apply(query, key, value, is_causal, block_size)
    return out
