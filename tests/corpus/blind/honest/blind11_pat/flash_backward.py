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


def _working_dtype(query: torch.Tensor) -> torch.dtype:
    """float32 for half-precision inputs, else the input's own dtype."""
    return torch.promote_types(query.dtype, torch.float32)


def _scores(q: torch.Tensor, k_tile: torch.Tensor, scale: float, is_causal: bool, j0: int, S: int) -> torch.Tensor:
    """s_ij = <q_i, k_j> * scale for the keys j0 .. j0 + bs - 1: (B, H, L, E), (B, H, bs, E) -> (B, H, L, bs).

    Causal (bottom-right): query i sits at position S - L + i and sees the keys j <= S - L + i; the others -inf."""
    s_tile = torch.einsum("bhie,bhje->bhij", q, k_tile) * scale               # (B, H, L, bs)
    if is_causal:
        L, bs = q.shape[-2], k_tile.shape[-2]
        i_pos = torch.arange(L, device=q.device)[:, None] + (S - L)             # (L, 1)
        j_pos = torch.arange(j0, j0 + bs, device=q.device)[None, :]             # (1, bs)
        s_tile = torch.where(j_pos <= i_pos, s_tile, float("-inf"))             # (B, H, L, bs)
    return s_tile


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
    B, H, L, E = query.shape
    S, Ev = key.shape[-2], value.shape[-1]
    assert key.shape == (B, H, S, E) and value.shape == (B, H, S, Ev), "q (B,H,L,E), k (B,H,S,E), v (B,H,S,Ev)"
    work = _working_dtype(query)
    q, k, v = query.to(work), key.to(work), value.to(work)
    scale = 1.0 / math.sqrt(E)
    m = torch.full((B, H, L, 1), float("-inf"), dtype=work, device=query.device)  # running row max
    l = torch.zeros(B, H, L, 1, dtype=work, device=query.device)                # running sum of exp(s - m)
    acc = torch.zeros(B, H, L, Ev, dtype=work, device=query.device)            # running sum of exp(s - m) v
    for j0 in range(0, S, block_size):
        j1 = min(j0 + block_size, S)
        s_tile = _scores(q, k[:, :, j0:j1], scale, is_causal, j0, S)           # (B, H, L, bs), -inf where masked
        m_new = torch.maximum(m, s_tile.amax(dim=-1, keepdim=True))             # (B, H, L, 1)
        # rows that have seen no key yet keep m = -inf: shift them by 0 so that exp(-inf - 0) = 0, never NaN
        m_shift = torch.where(torch.isfinite(m_new), m_new, 0.0)               # (B, H, L, 1)
        p_tile = torch.exp(s_tile - m_shift)                                    # (B, H, L, bs)
        alpha = torch.exp(m - m_shift)                                          # (B, H, L, 1): rescales the past
        l = alpha * l + p_tile.sum(dim=-1, keepdim=True)
        acc = alpha * acc + torch.einsum("bhij,bhje->bhie", p_tile, v[:, :, j0:j1])
        m = m_new
    seen = l > 0                                                                # (B, H, L, 1): rows with a key
    out = torch.where(seen, acc / torch.where(seen, l, 1.0), 0.0)              # (B, H, L, Ev)
    lse = torch.where(seen, m + torch.log(torch.where(seen, l, 1.0)), float("-inf")).squeeze(-1)  # (B, H, L)
    assert bool(torch.isfinite(out).all()), "the output is a convex combination of values: finite"
    assert not bool(torch.isnan(lse).any()), "lse is finite, or -inf for a row without keys"
    out = out.to(query.dtype)
    assert out.shape == (B, H, L, Ev) and lse.shape == (B, H, L) and lse.dtype == work
    return out, lse


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
    B, H, L, E = query.shape
    S, Ev = key.shape[-2], value.shape[-1]
    assert key.shape == (B, H, S, E) and value.shape == (B, H, S, Ev)
    assert out.shape == grad_out.shape == (B, H, L, Ev) and lse.shape == (B, H, L)
    work = _working_dtype(query)
    q, k, v = query.to(work), key.to(work), value.to(work)
    o, do, lse_w = out.to(work), grad_out.to(work), lse.to(work)
    scale = 1.0 / math.sqrt(E)
    # D_i = sum_e dO_ie O_ie  (= sum_j P_ij dP_ij)
    D = torch.einsum("bhie,bhie->bhi", do, o).unsqueeze(-1)                     # (B, H, L, 1)
    live = torch.isfinite(lse_w).unsqueeze(-1)                                  # (B, H, L, 1): rows with a key
    lse_shift = torch.where(live, lse_w.unsqueeze(-1), 0.0)                     # (B, H, L, 1)
    dq = torch.zeros(B, H, L, E, dtype=work, device=query.device)
    dk = torch.empty(B, H, S, E, dtype=work, device=query.device)
    dv = torch.empty(B, H, S, Ev, dtype=work, device=query.device)
    for j0 in range(0, S, block_size):
        j1 = min(j0 + block_size, S)
        k_j, v_j = k[:, :, j0:j1], v[:, :, j0:j1]                               # (B, H, bs, E), (B, H, bs, Ev)
        s_tile = _scores(q, k_j, scale, is_causal, j0, S)                       # (B, H, L, bs)
        # P_ij = exp(s_ij - lse_i); a row without keys has P = 0
        P = torch.where(live, torch.exp(s_tile - lse_shift), 0.0)               # (B, H, L, bs)
        dv[:, :, j0:j1] = torch.einsum("bhij,bhie->bhje", P, do)                # dV_j = P^T dO
        dP = torch.einsum("bhie,bhje->bhij", do, v_j)                           # dP = dO V_j^T
        dS = P * (dP - D)                                                       # softmax backward
        dq += torch.einsum("bhij,bhje->bhie", dS, k_j) * scale                  # dQ += dS K_j scale
        dk[:, :, j0:j1] = torch.einsum("bhij,bhie->bhje", dS, q) * scale        # dK_j = dS^T Q scale
    assert bool(torch.isfinite(dq).all() and torch.isfinite(dk).all() and torch.isfinite(dv).all()), \
        "gradients of finite inputs are finite"
    dq, dk, dv = dq.to(query.dtype), dk.to(key.dtype), dv.to(value.dtype)
    assert dq.shape == query.shape and dk.shape == key.shape and dv.shape == value.shape
    return dq, dk, dv


class FlashAttentionFunction(torch.autograd.Function):
    """softmax(q k^T / sqrt(E)) v with a hand-written FlashAttention-2 backward."""

    @staticmethod
    def forward(ctx: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, is_causal: bool = False,
                block_size: int = 64) -> torch.Tensor:
        """Run flash_forward; save q, k, v, out and lse (nothing else) with ctx.save_for_backward; return out."""
        out, lse = flash_forward(query, key, value, is_causal, block_size)
        ctx.save_for_backward(query, key, value, out, lse)
        ctx.is_causal, ctx.block_size = is_causal, block_size                  # plain Python values, not tensors
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
    out = FlashAttentionFunction.apply(query, key, value, is_causal, block_size)
    assert out.shape == (*query.shape[:-1], value.shape[-1]) and out.dtype == query.dtype
    return out
