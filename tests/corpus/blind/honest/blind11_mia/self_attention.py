# Generated from solutions/self_attention.py by `grader build`. Your task: replace each
# `raise NotImplementedError(...)` with working code. Keep the names and signatures.
"""Exercise `self_attention`: self-attention with trainable weights, the book's V1 and V2.

Each token x_i (a row of x) is projected three times: query q_i = x_i W_q, key k_i = x_i W_k,
value v_i = x_i W_v. Token i attends to token j with weight softmax_j(q_i . k_j / sqrt(d_out)),
and its context vector is the weighted sum of the values. No mask, no dropout here.

- `SelfAttentionV1` stores the three projections as `nn.Parameter(torch.rand(d_in, d_out))` named
  `W_query`, `W_key`, `W_value`, and computes `x @ W_query` etc.
- `SelfAttentionV2` uses `nn.Linear(d_in, d_out, bias=qkv_bias)` under the same names. A Linear
  computes `x @ weight.T (+ bias)`, so V1 with `W_query = V2.W_query.weight.T` (same for key and
  value) gives exactly V2's output when qkv_bias=False.

Inputs are (T, d_in) or batched (B, T, d_in); outputs (T, d_out) or (B, T, d_out).
"""

from __future__ import annotations

import torch
from torch import nn


def _attend(queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """softmax(q k^T / sqrt(d_out)) v, shared by V1 and V2 (works on (T, d) and (B, T, d))."""
    scale = keys.shape[-1] ** -0.5  # 1 / sqrt(d_out)
    scores = torch.matmul(queries, keys.transpose(-2, -1)) * scale
    weights = torch.softmax(scores, dim=-1)
    return torch.matmul(weights, values)


class SelfAttentionV1(nn.Module):
    """Self-attention with the projection matrices as raw parameters of shape (d_in, d_out)."""

    def __init__(self, d_in: int, d_out: int) -> None:
        """Create `W_query`, `W_key`, `W_value`: each `nn.Parameter(torch.rand(d_in, d_out))`."""
        super().__init__()
        self.W_query = nn.Parameter(torch.rand(d_in, d_out))
        self.W_key = nn.Parameter(torch.rand(d_in, d_out))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (T, d_in) or (B, T, d_in) -> context vectors (T, d_out) or (B, T, d_out).

        queries = x @ W_query, keys = x @ W_key, values = x @ W_value;
        weights = softmax(queries @ keys^T / sqrt(d_out)) over the keys (the last dim);
        return weights @ values. Transpose only the last two dims of `keys` (it may be 3-D).
        """
        # x: (..., T, d_in) -> queries, keys, values: (..., T, d_out); scores, weights: (..., T, T) -> (..., T, d_out)
        queries = torch.matmul(x, self.W_query)
        keys = torch.matmul(x, self.W_key)
        values = torch.matmul(x, self.W_value)
        return _attend(queries, keys, values)


class SelfAttentionV2(nn.Module):
    """Self-attention with `nn.Linear` projections (`bias=qkv_bias`)."""

    def __init__(self, d_in: int, d_out: int, qkv_bias: bool = False) -> None:
        """Create `W_query`, `W_key`, `W_value`: each `nn.Linear(d_in, d_out, bias=qkv_bias)`."""
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (T, d_in) or (B, T, d_in) -> context vectors (T, d_out) or (B, T, d_out).

        Same computation as `SelfAttentionV1.forward`, with queries = W_query(x) and so on.
        """
        # x: (..., T, d_in) -> queries, keys, values: (..., T, d_out); scores, weights: (..., T, T) -> (..., T, d_out)
        queries = self.W_query(x)
        keys = self.W_key(x)
        values = self.W_value(x)
        return _attend(queries, keys, values)
