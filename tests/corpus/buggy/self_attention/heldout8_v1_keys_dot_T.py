"""Bug: SelfAttentionV1 computes `queries @ keys.T`; for a batched (B, T, d_in) input `.T` reverses all three dimensions, so V1 fails (or mixes batch items) on batched inputs while 2-D inputs work.

Misconception: keys-dot-t
Held out: yes
Source: seed notebook 001_6d8b84533e267197.txt (SelfAttentionV1 written with `attn_scores = queries@keys.T`); from the reference
"""

from __future__ import annotations

import torch
from torch import nn


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
        queries = x @ self.W_query  # (..., T, d_out)
        keys = x @ self.W_key  # (..., T, d_out)
        values = x @ self.W_value  # (..., T, d_out)
        scores = queries @ keys.T  # (T, d_out) @ (d_out, T) -> (T, T)
        weights = torch.softmax(scores / keys.shape[-1] ** 0.5, dim=-1)  # (..., T, T), rows sum to 1
        return weights @ values  # (..., T, T) @ (..., T, d_out) -> (..., T, d_out)


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
        queries = self.W_query(x)  # (..., T, d_out)
        keys = self.W_key(x)  # (..., T, d_out)
        values = self.W_value(x)  # (..., T, d_out)
        scores = queries @ keys.transpose(-2, -1)  # (..., T, d_out) @ (..., d_out, T) -> (..., T, T)
        weights = torch.softmax(scores / keys.shape[-1] ** 0.5, dim=-1)  # (..., T, T), rows sum to 1
        return weights @ values  # (..., T, T) @ (..., T, d_out) -> (..., T, d_out)
