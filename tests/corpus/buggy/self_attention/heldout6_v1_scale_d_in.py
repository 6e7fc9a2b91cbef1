"""Bug: SelfAttentionV1 scales the scores by sqrt(d_in) (the input width) instead of sqrt(d_out), so the weights are too sharp or too flat whenever d_in != d_out.

Misconception: wrong-scale
Held out: yes
Source: 001_6d8b84533e267197.txt: d_k is the keys' width; pitfall: taking the width from x; written from scratch
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
        q = x @ self.W_query
        k = x @ self.W_key
        v = x @ self.W_value
        d_k = x.shape[-1]
        attn_scores = q @ k.transpose(-2, -1)
        attn_weights = torch.softmax(attn_scores / d_k**0.5, dim=-1)
        return attn_weights @ v


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
        q = self.W_query(x)
        k = self.W_key(x)
        v = self.W_value(x)
        d_k = k.shape[-1]
        attn_scores = q @ k.transpose(-2, -1)
        attn_weights = torch.softmax(attn_scores / d_k**0.5, dim=-1)
        return attn_weights @ v
