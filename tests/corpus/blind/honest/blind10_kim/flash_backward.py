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


def _check_inputs(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, block_size: int) -> None:
    """Shapes that fit together: (..., L, E), (..., S, E), (..., S, Ev) with the same leading dims."""
    if isinstance(block_size, bool) or int(block_size) != block_size or int(block_size) < 1:
        raise ValueError(f"block_size must be an integer >= 1, got {block_size!r}")
    if query.dim() < 2 or key.dim() != query.dim() or value.dim() != query.dim():
        raise ValueError(f"query, key and value must have the same number of dims (>= 2), got {tuple(query.shape)}, "
                         f"{tuple(key.shape)}, {tuple(value.shape)}")
    if query.shape[:-2] != key.shape[:-2] or query.shape[:-2] != value.shape[:-2]:
        raise ValueError(f"query, key and value need the same leading dims, got {tuple(query.shape[:-2])}, "
                         f"{tuple(key.shape[:-2])}, {tuple(value.shape[:-2])}")
    if int(key.shape[-1]) != int(query.shape[-1]):
        raise ValueError(f"query and key need the same feature size E, got {int(query.shape[-1])} and "
                         f"{int(key.shape[-1])}")
    if int(key.shape[-2]) != int(value.shape[-2]):
        raise ValueError(f"key and value need the same number of positions S, got {int(key.shape[-2])} and "
                         f"{int(value.shape[-2])}")


_QUERY_ROWS = 128   # queries per tile (at least block_size): tiles stay within (L, block_size) and loops stay short


def _tile_mask(q_start: int, q_stop: int, k_start: int, k_stop: int, shift: int,
               device: torch.device) -> torch.Tensor:
    """(q_stop - q_start, k_stop - k_start) bool, True = may attend, for a bottom-right causal mask: query i sits at
    position i + shift (shift = S - L) and sees keys 0 .. i + shift."""
    q_pos = torch.arange(q_start, q_stop, device=device) + shift
    k_pos = torch.arange(k_start, k_stop, device=device)
    return k_pos[None, :] <= q_pos[:, None]


def _tile_is_hidden(q_stop: int, k_start: int, shift: int) -> bool:
    """True when no query of the tile (the last one is q_stop - 1) can see the first key of the key tile."""
    return k_start > q_stop - 1 + shift


def flash_forward(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, is_causal: bool = False,
                  block_size: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """Tiled attention with an online softmax (as in the first assignment) that also returns the log-sum-exp.

    Returns:
        (out, lse): out (B, H, L, Ev) in query's dtype; lse (B, H, L), lse_i = m_i + log l_i from the FINAL running
        max m and denominator l (after the last tile), in float32 for half inputs, else query's dtype.
    """
    assert block_size >= 1, "block_size must be a positive integer"
    _check_inputs(query, key, value, block_size)
    bs = int(block_size)
    rows = max(bs, _QUERY_ROWS)                                       # queries per tile
    lead = tuple(query.shape[:-2])
    L, S = int(query.shape[-2]), int(key.shape[-2])
    E, Ev = int(query.shape[-1]), int(value.shape[-1])
    work = torch.promote_types(query.dtype, torch.float32)           # half -> float32, float64 stays
    scale = 1.0 / math.sqrt(E)
    shift = S - L                                                     # bottom-right: query i sits at S - L + i
    neg_inf = float("-inf")

    with torch.no_grad():
        q = query.detach().to(work)
        k = key.detach().to(work)
        v = value.detach().to(work)
        out_tiles = []
        lse_tiles = []
        # outer loop: one tile of queries at a time, each with its own running statistics
        for q_start in range(0, L, rows):
            q_stop = min(q_start + rows, L)
            q_tile = q[..., q_start:q_stop, :]                        # (B, H, bq, E)
            bq = q_stop - q_start
            m = torch.full((*lead, bq, 1), neg_inf, dtype=work, device=q.device)   # running max
            denom = torch.zeros((*lead, bq, 1), dtype=work, device=q.device)           # running denominator
            acc = torch.zeros((*lead, bq, Ev), dtype=work, device=q.device)        # running numerator @ v
            # inner loop: the key tiles, the last one possibly shorter
            for k_start in range(0, S, bs):
                k_stop = min(k_start + bs, S)
                if is_causal and _tile_is_hidden(q_stop, k_start, shift):
                    break                                             # every later key tile is hidden too
                s_tile = torch.matmul(q_tile, k[..., k_start:k_stop, :].transpose(-2, -1)) * scale   # (.., bq, bk)
                if is_causal:
                    seen = _tile_mask(q_start, q_stop, k_start, k_stop, shift, q.device)
                    s_tile = s_tile.masked_fill(~seen, neg_inf)
                m_new = torch.maximum(m, s_tile.amax(dim=-1, keepdim=True))
                # rows that have seen no key yet keep m = -inf; subtract 0 there instead (no inf - inf)
                m_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
                p_tile = torch.exp(s_tile - m_safe)                   # masked entries: exp(-inf) = 0
                rescale = torch.exp(m - m_safe)                       # old m = -inf: exp(-inf) = 0, nothing to keep
                denom = denom * rescale + p_tile.sum(dim=-1, keepdim=True)
                acc = acc * rescale + torch.matmul(p_tile, v[..., k_start:k_stop, :])
                m = m_new
            has_key = denom > 0
            safe_denom = torch.where(has_key, denom, torch.ones_like(denom))       # 1 where no key: no 0/0
            out_tile = torch.where(has_key, acc / safe_denom, torch.zeros_like(acc))
            lse_tile = torch.where(has_key, m + torch.log(safe_denom), torch.full_like(denom, neg_inf))
            out_tiles.append(out_tile)
            lse_tiles.append(lse_tile.squeeze(-1))
        if L == 0:
            out = torch.zeros((*lead, 0, Ev), dtype=work, device=q.device)
            lse = torch.zeros((*lead, 0), dtype=work, device=q.device)
        else:
            out = torch.cat(out_tiles, dim=-2)                        # (B, H, L, Ev)
            lse = torch.cat(lse_tiles, dim=-1)                        # (B, H, L)
    lse_dtype = torch.float32 if query.dtype in (torch.float16, torch.bfloat16) else query.dtype
    return out.to(query.dtype), lse.to(lse_dtype)


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
    _check_inputs(query, key, value, block_size)
    bs = int(block_size)
    rows = max(bs, _QUERY_ROWS)                                       # queries per tile
    lead = tuple(query.shape[:-2])
    L, S = int(query.shape[-2]), int(key.shape[-2])
    E, Ev = int(query.shape[-1]), int(value.shape[-1])
    if tuple(out.shape) != (*lead, L, Ev) or tuple(grad_out.shape) != (*lead, L, Ev):
        raise ValueError(f"out and grad_out must be {(*lead, L, Ev)}, got {tuple(out.shape)} and "
                         f"{tuple(grad_out.shape)}")
    if tuple(lse.shape) != (*lead, L):
        raise ValueError(f"lse must be {(*lead, L)}, got {tuple(lse.shape)}")
    work = torch.promote_types(query.dtype, torch.float32)
    scale = 1.0 / math.sqrt(E)
    shift = S - L

    with torch.no_grad():
        q = query.detach().to(work)
        k = key.detach().to(work)
        v = value.detach().to(work)
        o = out.detach().to(work)
        do = grad_out.detach().to(device=q.device, dtype=work)
        lse_w = lse.detach().to(device=q.device, dtype=work).unsqueeze(-1)       # (B, H, L, 1)
        # a row without any key has lse = -inf; use +inf there so that exp(s - lse) is 0 and never NaN
        lse_w = torch.where(torch.isneginf(lse_w), torch.full_like(lse_w, float("inf")), lse_w)
        D = (do * o).sum(dim=-1, keepdim=True)                                  # (B, H, L, 1)

        # the query tiles: their bounds and a running dQ for each, kept in lists
        q_bounds = [(a, min(a + rows, L)) for a in range(0, L, rows)]
        dq_tiles = [torch.zeros((*lead, b - a, E), dtype=work, device=q.device) for a, b in q_bounds]
        dk_tiles = []
        dv_tiles = []
        # FlashAttention-2, Algorithm 2: outer loop over key tiles, inner loop over query tiles
        for k_start in range(0, S, bs):
            k_stop = min(k_start + bs, S)
            k_tile = k[..., k_start:k_stop, :]                      # (B, H, bk, E)
            v_tile = v[..., k_start:k_stop, :]                      # (B, H, bk, Ev)
            dk_j = torch.zeros_like(k_tile)
            dv_j = torch.zeros_like(v_tile)
            for idx, (q_start, q_stop) in enumerate(q_bounds):
                if is_causal and _tile_is_hidden(q_stop, k_start, shift):
                    continue                                        # P is all zeros here: nothing to add
                q_tile = q[..., q_start:q_stop, :]
                do_tile = do[..., q_start:q_stop, :]
                s_tile = torch.matmul(q_tile, k_tile.transpose(-2, -1)) * scale      # (B, H, bq, bk)
                if is_causal:
                    seen = _tile_mask(q_start, q_stop, k_start, k_stop, shift, q.device)
                    s_tile = s_tile.masked_fill(~seen, float("-inf"))
                p_tile = torch.exp(s_tile - lse_w[..., q_start:q_stop, :])            # rebuilt probabilities
                dv_j = dv_j + torch.matmul(p_tile.transpose(-2, -1), do_tile)
                dp_tile = torch.matmul(do_tile, v_tile.transpose(-2, -1))             # (B, H, bq, bk)
                ds_tile = p_tile * (dp_tile - D[..., q_start:q_stop, :])
                dq_tiles[idx] = dq_tiles[idx] + torch.matmul(ds_tile, k_tile) * scale
                dk_j = dk_j + torch.matmul(ds_tile.transpose(-2, -1), q_tile) * scale
            dk_tiles.append(dk_j)
            dv_tiles.append(dv_j)

        dq = torch.cat(dq_tiles, dim=-2) if dq_tiles else torch.zeros((*lead, 0, E), dtype=work, device=q.device)
        dk = torch.cat(dk_tiles, dim=-2) if dk_tiles else torch.zeros((*lead, 0, E), dtype=work, device=q.device)
        dv = torch.cat(dv_tiles, dim=-2) if dv_tiles else torch.zeros((*lead, 0, Ev), dtype=work, device=q.device)
    return dq.to(query.dtype), dk.to(key.dtype), dv.to(value.dtype)


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
        dq, dk, dv = flash_attention_backward(query, key, value, out, lse, grad_out, ctx.is_causal, ctx.block_size)
        return dq, dk, dv, None, None


def flash_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, is_causal: bool = False,
                    block_size: int = 64) -> torch.Tensor:
    """Attention through FlashAttentionFunction: (B, H, L, Ev) in query's dtype, differentiable in q, k, v."""
    assert block_size >= 1, "block_size must be a positive integer"
    _check_inputs(query, key, value, block_size)
    return FlashAttentionFunction.apply(query, key, value, bool(is_causal), int(block_size))
