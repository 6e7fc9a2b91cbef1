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


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Half-precision inputs run in float32; float32 and float64 keep their own precision."""
    return torch.promote_types(dtype, torch.float32)


def _check_qkv(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Size:
    """Shape guards; returns the broadcast leading dims of the three inputs."""
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise ValueError("query, key and value must be (..., L, E), (..., S, E) and (..., S, Ev)")
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(f"query and key must share the last dim E, got {query.shape[-1]} and {key.shape[-1]}")
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(f"key and value must have the same length S, got {key.shape[-2]} and {value.shape[-2]}")
    try:
        return torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    except RuntimeError as exc:
        raise ValueError(f"leading dims of query, key and value do not broadcast: {exc}") from None


def _causal_keep(q_len: int, kv_len: int, start: int, end: int, device: torch.device) -> torch.Tensor:
    """(L, end - start) bool tile of the bottom-right causal mask: query i sits at position S - L + i and may see
    keys 0 .. S - L + i; only the keys start .. end - 1 of this tile."""
    q_pos = torch.arange(q_len, device=device)[:, None] + (kv_len - q_len)
    k_pos = torch.arange(start, end, device=device)[None, :]
    return k_pos <= q_pos


@torch.no_grad()
def flash_forward(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, is_causal: bool = False,
                  block_size: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """Tiled attention with an online softmax (as in the first assignment) that also returns the log-sum-exp.

    Returns:
        (out, lse): out (B, H, L, Ev) in query's dtype; lse (B, H, L), lse_i = m_i + log l_i from the FINAL running
        max m and denominator l (after the last tile), in float32 for half inputs, else query's dtype.
    """
    assert block_size >= 1, "block_size must be a positive integer"
    lead = _check_qkv(query, key, value)
    q_len, kv_len, v_dim = query.shape[-2], key.shape[-2], value.shape[-1]
    compute = _compute_dtype(query.dtype)
    scale = 1.0 / math.sqrt(query.shape[-1])
    device = query.device

    q = query.to(compute)
    row_max = torch.full((*lead, q_len, 1), float("-inf"), dtype=compute, device=device)   # m
    row_sum = torch.zeros((*lead, q_len, 1), dtype=compute, device=device)                  # l
    acc = torch.zeros((*lead, q_len, v_dim), dtype=compute, device=device)                  # unnormalised O

    for start in range(0, kv_len, block_size):
        end = min(start + block_size, kv_len)
        k_tile = key[..., start:end, :].to(compute)
        v_tile = value[..., start:end, :].to(compute)
        scores = torch.matmul(q, k_tile.transpose(-2, -1)) * scale                         # (B, H, L, bs)
        if is_causal:
            scores = scores.masked_fill(~_causal_keep(q_len, kv_len, start, end, device), float("-inf"))
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        # rows that have seen no key yet keep m = -inf: shift them by 0 so exp(-inf - (-inf)) never happens
        shift = torch.where(torch.isneginf(new_max), torch.zeros_like(new_max), new_max)
        probs = torch.exp(scores - shift)
        correction = torch.exp(row_max - shift)
        row_sum = row_sum * correction + probs.sum(dim=-1, keepdim=True)
        acc = acc * correction + torch.matmul(probs, v_tile)
        row_max = new_max

    lse = (row_max + torch.log(row_sum)).squeeze(-1)             # -inf (not NaN) for rows without any key
    out = acc / torch.where(row_sum == 0, torch.ones_like(row_sum), row_sum)   # those rows: 0
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
    lead = _check_qkv(query, key, value)
    q_len, kv_len, v_dim = query.shape[-2], key.shape[-2], value.shape[-1]
    out_shape = (*lead, q_len, v_dim)
    for name, t in (("out", out), ("grad_out", grad_out)):
        if torch.broadcast_shapes(t.shape, out_shape) != torch.Size(out_shape) or t.dim() < 2 \
                or t.shape[-2:] != (q_len, v_dim):
            raise ValueError(f"{name} must be {out_shape}, got {tuple(t.shape)}")
    if lse.shape[-1:] != (q_len,) or torch.broadcast_shapes(lse.shape, (*lead, q_len)) != torch.Size((*lead, q_len)):
        raise ValueError(f"lse must be {(*lead, q_len)}, got {tuple(lse.shape)}")

    compute = _compute_dtype(query.dtype)
    scale = 1.0 / math.sqrt(query.shape[-1])
    device = query.device

    q = query.to(compute)
    d_out = grad_out.to(compute)
    delta = (d_out * out.to(compute)).sum(dim=-1, keepdim=True)       # D = rowsum(dO * O): (B, H, L, 1)
    lse_col = lse.to(compute).unsqueeze(-1)                           # (B, H, L, 1)
    # a row without keys (lse = -inf) gets +inf: exp(s - inf) = 0 for every key, never exp(-inf + inf) = NaN
    lse_col = torch.where(torch.isneginf(lse_col), torch.full_like(lse_col, float("inf")), lse_col)

    d_query = torch.zeros((*lead, q_len, query.shape[-1]), dtype=compute, device=device)
    d_keys, d_values = [], []
    for start in range(0, kv_len, block_size):
        end = min(start + block_size, kv_len)
        k_tile = key[..., start:end, :].to(compute)                   # (B, H, bs, E)
        v_tile = value[..., start:end, :].to(compute)                 # (B, H, bs, Ev)
        scores = torch.matmul(q, k_tile.transpose(-2, -1)) * scale    # (B, H, L, bs)
        if is_causal:
            scores = scores.masked_fill(~_causal_keep(q_len, kv_len, start, end, device), float("-inf"))
        probs = torch.exp(scores - lse_col)                           # P_j, rebuilt from lse alone
        d_values.append(torch.matmul(probs.transpose(-2, -1), d_out))         # dV_j = P_j^T dO
        d_probs = torch.matmul(d_out, v_tile.transpose(-2, -1))               # dP_j = dO V_j^T
        d_scores = probs * (d_probs - delta)                                  # dS_j = P_j * (dP_j - D)
        d_query = d_query + torch.matmul(d_scores, k_tile) * scale            # dQ += dS_j K_j * scale
        d_keys.append(torch.matmul(d_scores.transpose(-2, -1), q) * scale)    # dK_j = dS_j^T Q * scale

    if d_keys:
        d_key = torch.cat(d_keys, dim=-2)
        d_value = torch.cat(d_values, dim=-2)
    else:  # no keys at all
        d_key = torch.zeros((*lead, 0, key.shape[-1]), dtype=compute, device=device)
        d_value = torch.zeros((*lead, 0, v_dim), dtype=compute, device=device)
    # inputs that were broadcast get their gradients summed back to their own shapes
    return (d_query.sum_to_size(query.shape).to(query.dtype),
            d_key.sum_to_size(key.shape).to(key.dtype),
            d_value.sum_to_size(value.shape).to(value.dtype))


class FlashAttentionFunction(torch.autograd.Function):
    """softmax(q k^T / sqrt(E)) v with a hand-written FlashAttention-2 backward."""

    @staticmethod
    def forward(ctx: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, is_causal: bool = False,
                block_size: int = 64) -> torch.Tensor:
        """Run flash_forward; save q, k, v, out and lse (nothing else) with ctx.save_for_backward; return out."""
        out, lse = flash_forward(query, key, value, is_causal, block_size)
        ctx.save_for_backward(query, key, value, out, lse)
        ctx.is_causal = bool(is_causal)
        ctx.block_size = int(block_size)
        return out

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        """One gradient per forward argument: (dq, dk, dv, None, None) from flash_attention_backward."""
        query, key, value, out, lse = ctx.saved_tensors
        d_query, d_key, d_value = flash_attention_backward(query, key, value, out, lse, grad_out,
                                                           ctx.is_causal, ctx.block_size)
        needs = ctx.needs_input_grad
        return (d_query if needs[0] else None, d_key if needs[1] else None, d_value if needs[2] else None,
                None, None)


def flash_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, is_causal: bool = False,
                    block_size: int = 64) -> torch.Tensor:
    """Attention through FlashAttentionFunction: (B, H, L, Ev) in query's dtype, differentiable in q, k, v."""
    return FlashAttentionFunction.apply(query, key, value, is_causal, block_size)
