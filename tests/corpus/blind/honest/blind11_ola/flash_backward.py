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
from torch.autograd.function import once_differentiable


def _flatten(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor
             ) -> tuple[torch.dtype, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Check the shapes and fold every leading dim into one: q (N, L, E), k (N, S, E), v (N, S, Ev), in the dtype
    the computation runs in (float32 for half inputs, else the query's dtype)."""
    if query.dim() < 3 or key.dim() != query.dim() or value.dim() != query.dim():
        raise ValueError(f"query, key and value must be (B, H, L, E), (B, H, S, E), (B, H, S, Ev), got "
                         f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
    if (query.shape[:-2] != key.shape[:-2] or key.shape[:-2] != value.shape[:-2]
            or query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]):
        raise ValueError(f"incompatible shapes: query {tuple(query.shape)}, key {tuple(key.shape)}, "
                         f"value {tuple(value.shape)}")
    compute = torch.promote_types(query.dtype, torch.float32)
    q = query.reshape(-1, *query.shape[-2:]).to(compute)
    k = key.reshape(-1, *key.shape[-2:]).to(compute)
    v = value.reshape(-1, *value.shape[-2:]).to(compute)
    return compute, q, k, v


def _tile_scores(q: torch.Tensor, k_tile: torch.Tensor, j0: int, scale: float, is_causal: bool,
                 offset: int) -> torch.Tensor:
    """Scaled scores of all queries against one tile of keys starting at key j0: (N, L, bs), a fresh buffer of my
    own. Causal (bottom-right): query i sees key j when j - i <= offset = S - L; the others are -inf."""
    s = torch.bmm(q, k_tile.transpose(1, 2)).mul_(scale)
    if is_causal:
        rows = torch.arange(q.shape[1], device=q.device)
        cols = torch.arange(j0, j0 + k_tile.shape[1], device=q.device)
        s.masked_fill_(cols[None, :] - rows[:, None] > offset, float("-inf"))
    return s


def flash_forward(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, is_causal: bool = False,
                  block_size: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """Tiled attention with an online softmax (as in the first assignment) that also returns the log-sum-exp.

    Returns:
        (out, lse): out (B, H, L, Ev) in query's dtype; lse (B, H, L), lse_i = m_i + log l_i from the FINAL running
        max m and denominator l (after the last tile), in float32 for half inputs, else query's dtype.
    """
    assert block_size >= 1, "block_size must be a positive integer"
    with torch.no_grad():  # no autograd graph over the tiles: FlashAttentionFunction supplies the backward
        return _flash_forward(query, key, value, is_causal, block_size)


def _flash_forward(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, is_causal: bool,
                   block_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    # a tile of bs keys: scores and probabilities (B, H, L, bs); running max m and denominator l (B, H, L, 1);
    # accumulator (B, H, L, Ev)
    compute, q, k, v = _flatten(query, key, value)
    N, L, E = q.shape
    S, Ev = k.shape[1], v.shape[2]
    scale = 1.0 / math.sqrt(E)
    offset = S - L
    neg_inf = float("-inf")

    m = torch.full((N, L, 1), neg_inf, dtype=compute, device=q.device)  # running row max
    l = torch.zeros((N, L, 1), dtype=compute, device=q.device)          # running denominator
    acc = torch.zeros((N, L, Ev), dtype=compute, device=q.device)       # running unnormalised output
    for j0 in range(0, S, block_size):
        j1 = min(j0 + block_size, S)
        s = _tile_scores(q, k[:, j0:j1], j0, scale, is_causal, offset)  # (N, L, bs)
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        # rows that have seen no key yet keep m = -inf: subtract 0 there instead (their exp are all 0)
        m_safe = m_new.masked_fill(m_new == neg_inf, 0.0)
        alpha = (m - m_safe).exp_()                                     # rescales the old statistics
        p = s.sub_(m_safe).exp_()                                       # in place: s becomes the tile's P
        l.mul_(alpha).add_(p.sum(dim=-1, keepdim=True))
        acc.mul_(alpha).baddbmm_(p, v[:, j0:j1])
        m = m_new

    # rows without any key (causal, L > S): l = 0, acc = 0 -> output 0 and lse = -inf + log 0 = -inf
    out = acc.div_(l.masked_fill(l == 0, 1.0))
    lse = l.log_().add_(m)                                              # m + log l, in l's storage
    out = out.reshape(*query.shape[:-1], Ev).to(query.dtype)
    return out, lse.reshape(query.shape[:-1])


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
    with torch.no_grad():  # the gradients are computed by hand, tile by tile
        return _flash_backward(query, key, value, out, lse, grad_out, is_causal, block_size)


def _flash_backward(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, out: torch.Tensor,
                    lse: torch.Tensor, grad_out: torch.Tensor, is_causal: bool,
                    block_size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # D: (B, H, L, 1); a tile of bs keys: P, dP, dS (B, H, L, bs); dK_j (B, H, bs, E), dV_j (B, H, bs, Ev)
    compute, q, k, v = _flatten(query, key, value)
    N, L, E = q.shape
    S, Ev = k.shape[1], v.shape[2]
    if out.shape != (*query.shape[:-1], Ev) or grad_out.shape != out.shape or lse.shape != query.shape[:-1]:
        raise ValueError(f"out and grad_out must be {(*query.shape[:-1], Ev)} and lse {tuple(query.shape[:-1])}, got "
                         f"{tuple(out.shape)}, {tuple(grad_out.shape)} and {tuple(lse.shape)}")
    scale = 1.0 / math.sqrt(E)
    offset = S - L
    o = out.reshape(N, L, Ev).to(compute)
    do = grad_out.reshape(N, L, Ev).to(compute)
    lse3 = lse.reshape(N, L, 1).to(compute)
    # rows with no key have lse = -inf; subtracting +inf there makes every exp 0 (and no -inf - -inf = NaN)
    lse_safe = lse3.masked_fill(lse3 == float("-inf"), float("inf"))
    D = torch.mul(do, o).sum(dim=-1, keepdim=True)                      # (N, L, 1) = rowsum(dO * O)

    dq = torch.zeros((N, L, E), dtype=compute, device=q.device)         # accumulated over the tiles
    dk = torch.empty((N, S, E), dtype=compute, device=q.device)         # each tile's rows written once
    dv = torch.empty((N, S, Ev), dtype=compute, device=q.device)
    for j0 in range(0, S, block_size):
        j1 = min(j0 + block_size, S)
        k_tile, v_tile = k[:, j0:j1], v[:, j0:j1]
        p = _tile_scores(q, k_tile, j0, scale, is_causal, offset)       # (N, L, bs)
        p.sub_(lse_safe).exp_()                                         # P_j = exp(S_j - lse), rebuilt exactly
        dv[:, j0:j1].baddbmm_(p.transpose(1, 2), do, beta=0)            # dV_j = P_j^T dO
        ds = torch.bmm(do, v_tile.transpose(1, 2))                      # dP_j = dO V_j^T
        ds.sub_(D).mul_(p).mul_(scale)                                  # dS_j = P_j * (dP_j - D), times the scale
        dq.baddbmm_(ds, k_tile)                                         # dQ += dS_j K_j * scale
        dk[:, j0:j1].baddbmm_(ds.transpose(1, 2), q, beta=0)            # dK_j = dS_j^T Q * scale

    return (dq.reshape(query.shape).to(query.dtype), dk.reshape(key.shape).to(key.dtype),
            dv.reshape(value.shape).to(value.dtype))


class FlashAttentionFunction(torch.autograd.Function):
    """softmax(q k^T / sqrt(E)) v with a hand-written FlashAttention-2 backward."""

    @staticmethod
    def forward(ctx: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, is_causal: bool = False,
                block_size: int = 64) -> torch.Tensor:
        """Run flash_forward; save q, k, v, out and lse (nothing else) with ctx.save_for_backward; return out."""
        out, lse = flash_forward(query, key, value, is_causal, block_size)
        ctx.save_for_backward(query, key, value, out, lse)
        ctx.is_causal = is_causal
        ctx.block_size = block_size
        return out

    @staticmethod
    @once_differentiable  # the backward itself runs without autograd: no gradients of gradients
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        """One gradient per forward argument: (dq, dk, dv, None, None) from flash_attention_backward."""
        query, key, value, out, lse = ctx.saved_tensors
        dq, dk, dv = flash_attention_backward(query, key, value, out, lse, grad_out, ctx.is_causal, ctx.block_size)
        return dq, dk, dv, None, None


def flash_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, is_causal: bool = False,
                    block_size: int = 64) -> torch.Tensor:
    """Attention through FlashAttentionFunction: (B, H, L, Ev) in query's dtype, differentiable in q, k, v."""
    return FlashAttentionFunction.apply(query, key, value, is_causal, block_size)
