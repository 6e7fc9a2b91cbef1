# Generated from solutions/flash_backward.py by `grader build`. Your task: replace each
# `raise NotImplementedError(...)` with working code. Keep the names and signatures.
"""Exercise `flash_backward`: FlashAttention-2's forward AND backward, as a `torch.autograd.Function`.

The first assignment's `flash_attention` let autograd differentiate through its tiled loop. Autograd then keeps
every tile's probabilities for the backward pass, L x S numbers in all: exactly what FlashAttention exists to avoid.
Here the forward runs without autograd and keeps only what the backward needs to rebuild any tile exactly: the
inputs q, k, v, the output O and the row log-sum-exp lse_i = log sum_j exp(s_ij) of the scaled (masked) scores.
Never P, never S. Since P_ij = exp(s_ij - lse_i), the backward recomputes each tile's probabilities from lse alone
and follows FlashAttention-2 (Dao 2023, Algorithm 2), tile of keys by tile of keys:

    D    = rowsum(dO * O)                  (B, H, L): equals sum_j P_ij dP_ij, but needs no P
    S_j  = q K_j^T * scale (masked: -inf)  P_j = exp(S_j - lse)
    dV_j = P_j^T dO                        dP_j = dO V_j^T
    dS_j = P_j * (dP_j - D)                (the softmax's backward)
    dQ  += dS_j K_j * scale                dK_j = dS_j^T q * scale

Four parts: `flash_forward(q, k, v) -> (O, lse)`; `flash_attention_backward(q, k, v, O, lse, dO) -> (dq, dk, dv)`;
`FlashAttentionFunction`, whose forward saves only q, k, v, O and lse and whose backward calls
`flash_attention_backward`; and `flash_attention`, the function users call (`FlashAttentionFunction.apply`).

Conventions of the first assignment's flash_attention: query (B, H, L, E), key (B, H, S, E), value (B, H, S, Ev);
scale 1/sqrt(E); `is_causal` is bottom-right aligned (query i sits at position S - L + i and sees keys
0 .. S - L + i; with L > S the first L - S queries see no key: their output is 0, their lse -inf and their
gradients 0, never NaN); tiles of `block_size` keys, the last one possibly shorter; only (L, block_size) tiles,
never an (L, S) tensor, in the forward and in the backward. Half-precision inputs are computed in float32 and the
results cast back (lse stays float32). F.scaled_dot_product_attention is not allowed in this exercise.
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
    work = _work_dtype(query)
    q = query.to(work)
    L, S, scale = q.shape[-2], key.shape[-2], 1.0 / math.sqrt(query.shape[-1])
    m = q.new_full((*q.shape[:-1], 1), float("-inf"))
    l = q.new_zeros(*q.shape[:-1], 1)
    acc = q.new_zeros(*q.shape[:-1], value.shape[-1])
    for j in range(0, S, block_size):
        kj, vj = key[..., j:j + block_size, :].to(work), value[..., j:j + block_size, :].to(work)
        s = _tile_scores(q, kj, j, S, scale, is_causal)
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        shift = m_new.nan_to_num(neginf=0.0)  # a row without any key so far: exp(-inf - 0) = 0, never nan
        p = torch.exp(s - shift)
        alpha = torch.exp(m - shift)
        l = l * alpha + p.sum(dim=-1, keepdim=True)
        acc = acc * alpha + p @ vj
        m = m_new
    out = torch.where(l > 0, acc / l.clamp_min(torch.finfo(work).tiny), 0.0)
    lse = (m + l.log()).squeeze(-1)  # -inf for a row that saw no key
    return out.to(query.dtype), lse


def _work_dtype(t: torch.Tensor) -> torch.dtype:
    return torch.promote_types(t.dtype, torch.float32)


def _tile_scores(q: torch.Tensor, kj: torch.Tensor, j: int, S: int, scale: float, is_causal: bool) -> torch.Tensor:
    """Scaled scores of q against the key tile starting at key j: (..., L, bs), -inf where causality forbids."""
    s = q @ kj.transpose(-2, -1) * scale
    if is_causal:
        L = q.shape[-2]
        rows = torch.arange(S - L, S, device=q.device)[:, None]  # each query's absolute position (bottom-right)
        cols = torch.arange(j, j + kj.shape[-2], device=q.device)[None, :]
        s = s.masked_fill(cols > rows, float("-inf"))
    return s


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
    work = _work_dtype(query)
    q, o, do = query.to(work), out.to(work), grad_out.to(work)
    S, scale = key.shape[-2], 1.0 / math.sqrt(query.shape[-1])
    # rows with no key (lse = -inf) get lse = +inf: exp(s - inf) = 0, so P, dS and every gradient stay 0
    lse = lse.to(work).masked_fill(lse == float("-inf"), float("inf")).unsqueeze(-1)
    D = (do * o).sum(dim=-1, keepdim=True)
    dq = torch.zeros_like(q)
    dk = torch.zeros(key.shape, dtype=work, device=key.device)
    dv = torch.zeros(value.shape, dtype=work, device=value.device)
    for j in range(0, S, block_size):
        kj, vj = key[..., j:j + block_size, :].to(work), value[..., j:j + block_size, :].to(work)
        p = torch.exp(_tile_scores(q, kj, j, S, scale, is_causal) - lse)
        dv[..., j:j + block_size, :] = p.transpose(-2, -1) @ do
        ds = p * (do @ vj.transpose(-2, -1) - D)
        dq += ds @ kj * scale
        dk[..., j:j + block_size, :] = ds.transpose(-2, -1) @ q * scale
    return dq.to(query.dtype), dk.to(key.dtype), dv.to(value.dtype)


class FlashAttentionFunction(torch.autograd.Function):
    """softmax(q k^T / sqrt(E)) v with a hand-written FlashAttention-2 backward."""

    @staticmethod
    def forward(ctx: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, is_causal: bool = False,
                block_size: int = 64) -> torch.Tensor:
        """Run flash_forward; save q, k, v, out and lse (nothing else) with ctx.save_for_backward; return out."""
        out, lse = flash_forward(query, key, value, is_causal, block_size)
        ctx.save_for_backward(query, key, value, out, lse)
        ctx.is_causal, ctx.block_size = is_causal, block_size
        return out

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        """One gradient per forward argument: (dq, dk, dv, None, None) from flash_attention_backward."""
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = flash_attention_backward(q, k, v, out, lse, grad_out, ctx.is_causal, ctx.block_size)
        return dq, dk, dv, None, None


def flash_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, is_causal: bool = False,
                    block_size: int = 64) -> torch.Tensor:
    """Attention through FlashAttentionFunction: (B, H, L, Ev) in query's dtype, differentiable in q, k, v."""
    return FlashAttentionFunction.apply(query, key, value, is_causal, block_size)
