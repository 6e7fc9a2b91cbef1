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
    assert query.shape[-1] == key.shape[-1], "query and key need the same feature size E"
    assert key.shape[-2] == value.shape[-2], "key and value need the same length S"

    compute_dtype = torch.promote_types(query.dtype, torch.float32)   # half -> float32
    q = query.to(compute_dtype)
    num_queries = q.shape[-2]
    num_keys = key.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1])
    lead = q.shape[:-2]                                                # (B, H)

    # running statistics of the online softmax
    running_max = torch.full((*lead, num_queries, 1), float("-inf"), dtype=compute_dtype, device=q.device)
    running_sum = torch.zeros((*lead, num_queries, 1), dtype=compute_dtype, device=q.device)
    accumulator = torch.zeros((*lead, num_queries, value.shape[-1]), dtype=compute_dtype, device=q.device)

    for tile_start in range(0, num_keys, block_size):
        tile_end = min(tile_start + block_size, num_keys)
        k_tile = key[..., tile_start:tile_end, :].to(compute_dtype)      # (B, H, bs, E)
        v_tile = value[..., tile_start:tile_end, :].to(compute_dtype)    # (B, H, bs, Ev)

        scores = _scores_of_tile(q, k_tile, tile_start, num_keys, scale, is_causal)   # (B, H, L, bs)

        tile_max = scores.max(dim=-1, keepdim=True).values
        new_max = torch.maximum(running_max, tile_max)
        # rows that have seen no key yet keep max = -inf: subtract 0 instead, so exp gives 0 and not nan
        safe_max = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)

        probabilities = torch.exp(scores - safe_max)                      # (B, H, L, bs)
        correction = torch.exp(running_max - safe_max)                    # rescales what was accumulated

        running_sum = running_sum * correction + probabilities.sum(dim=-1, keepdim=True)
        accumulator = accumulator * correction + probabilities @ v_tile
        running_max = new_max

    # rows without any key (causal with L > S): output 0, lse -inf
    has_keys = running_sum > 0
    safe_sum = torch.where(has_keys, running_sum, torch.ones_like(running_sum))
    out = torch.where(has_keys, accumulator / safe_sum, torch.zeros_like(accumulator))
    lse = torch.where(has_keys, running_max + torch.log(safe_sum),
                      torch.full_like(running_max, float("-inf"))).squeeze(-1)     # (B, H, L)

    assert out.shape == (*lead, num_queries, value.shape[-1])
    return out.to(query.dtype), lse


def _scores_of_tile(q: torch.Tensor, k_tile: torch.Tensor, tile_start: int, num_keys: int, scale: float,
                    is_causal: bool) -> torch.Tensor:
    """q k_tile^T * scale, (..., L, bs); with is_causal the keys after each query's position are -inf.

    Causal is bottom-right aligned: query i sits at position num_keys - L + i.
    """
    scores = (q @ k_tile.transpose(-2, -1)) * scale
    if is_causal:
        num_queries = q.shape[-2]
        query_pos = torch.arange(num_queries, device=q.device).unsqueeze(1) + (num_keys - num_queries)   # (L, 1)
        key_pos = torch.arange(tile_start, tile_start + k_tile.shape[-2], device=q.device).unsqueeze(0)  # (1, bs)
        future = key_pos > query_pos                                                                     # (L, bs)
        scores = scores.masked_fill(future, float("-inf"))
    return scores


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
    compute_dtype = torch.promote_types(query.dtype, torch.float32)
    q = query.to(compute_dtype)
    o = out.to(compute_dtype)
    d_out = grad_out.to(compute_dtype)
    num_keys = key.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1])

    # D_i = sum_j dO_ij * O_ij  (= sum_j P_ij dP_ij, without P)
    D = (d_out * o).sum(dim=-1, keepdim=True)                          # (B, H, L, 1)

    # rows that saw no key have lse = -inf: their probabilities must be 0 (exp(s - lse) would be nan)
    lse_col = lse.to(compute_dtype).unsqueeze(-1)                      # (B, H, L, 1)
    row_has_keys = torch.isfinite(lse_col)
    safe_lse = torch.where(row_has_keys, lse_col, torch.zeros_like(lse_col))

    dq = torch.zeros(q.shape, dtype=compute_dtype, device=q.device)
    dk = torch.zeros(key.shape, dtype=compute_dtype, device=key.device)
    dv = torch.zeros(value.shape, dtype=compute_dtype, device=value.device)

    for tile_start in range(0, num_keys, block_size):
        tile_end = min(tile_start + block_size, num_keys)
        k_tile = key[..., tile_start:tile_end, :].to(compute_dtype)      # (B, H, bs, E)
        v_tile = value[..., tile_start:tile_end, :].to(compute_dtype)    # (B, H, bs, Ev)

        # rebuild this tile's probabilities from lse
        scores = _scores_of_tile(q, k_tile, tile_start, num_keys, scale, is_causal)   # (B, H, L, bs)
        probabilities = torch.exp(scores - safe_lse)
        probabilities = torch.where(row_has_keys, probabilities, torch.zeros_like(probabilities))

        # dV_j = P_j^T dO
        dv[..., tile_start:tile_end, :] = probabilities.transpose(-2, -1) @ d_out
        # dP_j = dO V_j^T ; dS_j = P_j * (dP_j - D)
        d_probabilities = d_out @ v_tile.transpose(-2, -1)
        d_scores = probabilities * (d_probabilities - D)
        # dQ += dS_j K_j * scale ; dK_j = dS_j^T Q * scale
        dq = dq + (d_scores @ k_tile) * scale
        dk[..., tile_start:tile_end, :] = (d_scores.transpose(-2, -1) @ q) * scale

    return dq.to(query.dtype), dk.to(key.dtype), dv.to(value.dtype)


class FlashAttentionFunction(torch.autograd.Function):
    """softmax(q k^T / sqrt(E)) v with a hand-written FlashAttention-2 backward."""

    @staticmethod
    def forward(ctx: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, is_causal: bool = False,
                block_size: int = 64) -> torch.Tensor:
        """Run flash_forward; save q, k, v, out and lse (nothing else) with ctx.save_for_backward; return out."""
        out, lse = flash_forward(query, key, value, is_causal=is_causal, block_size=block_size)
        # only what the backward needs to rebuild the tiles: no P, no S
        ctx.save_for_backward(query, key, value, out, lse)
        ctx.is_causal = is_causal
        ctx.block_size = block_size
        return out

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        """One gradient per forward argument: (dq, dk, dv, None, None) from flash_attention_backward."""
        query, key, value, out, lse = ctx.saved_tensors
        grad_query, grad_key, grad_value = flash_attention_backward(
            query, key, value, out, lse, grad_out, is_causal=ctx.is_causal, block_size=ctx.block_size)
        # no gradient for is_causal and block_size
        return grad_query, grad_key, grad_value, None, None


def flash_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, is_causal: bool = False,
                    block_size: int = 64) -> torch.Tensor:
    """Attention through FlashAttentionFunction: (B, H, L, Ev) in query's dtype, differentiable in q, k, v."""
    output = FlashAttentionFunction.apply(query, key, value, is_causal, block_size)
    return output
