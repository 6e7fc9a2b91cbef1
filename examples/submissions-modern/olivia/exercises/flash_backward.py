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
    raise NotImplementedError("TODO: implement flash_forward in flash_backward.py")


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
    raise NotImplementedError("TODO: implement flash_attention_backward in flash_backward.py")


class FlashAttentionFunction(torch.autograd.Function):
    """softmax(q k^T / sqrt(E)) v with a hand-written FlashAttention-2 backward."""

    @staticmethod
    def forward(ctx: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, is_causal: bool = False,
                block_size: int = 64) -> torch.Tensor:
        """Run flash_forward; save q, k, v, out and lse (nothing else) with ctx.save_for_backward; return out."""
        raise NotImplementedError("TODO: implement FlashAttentionFunction.forward in flash_backward.py")

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        """One gradient per forward argument: (dq, dk, dv, None, None) from flash_attention_backward."""
        raise NotImplementedError("TODO: implement FlashAttentionFunction.backward in flash_backward.py")


def flash_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, is_causal: bool = False,
                    block_size: int = 64) -> torch.Tensor:
    """Attention through FlashAttentionFunction: (B, H, L, Ev) in query's dtype, differentiable in q, k, v."""
    raise NotImplementedError("TODO: implement flash_attention in flash_backward.py")
