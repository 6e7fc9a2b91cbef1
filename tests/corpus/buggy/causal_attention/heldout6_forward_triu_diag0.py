"""Bug: forward builds its own mask with triu(diagonal=0), which also blocks the diagonal, so each token cannot see itself and the first token's row is all -inf (NaN output).

Misconception: mask-diagonal
Held out: yes
Source: 003_eef2211e07fb1ee1.txt: triu(..., diagonal=1) as the 'future' mask; off-by-one in the diagonal; written from scratch
"""

from __future__ import annotations

import math

import torch
from torch import nn


class CausalAttention(nn.Module):
    """Single-head causal self-attention with dropout on the attention weights.

    Args:
        d_in: size of each input vector.
        d_out: size of each query/key/value vector, and of each output vector.
        context_length: the longest sequence the module accepts (size of the `mask` buffer).
        dropout: probability of zeroing an attention weight during training.
        qkv_bias: whether the three projections have a bias.

    Attributes the grader relies on (names matter, they appear in `state_dict()`):
        W_query, W_key, W_value: nn.Linear(d_in, d_out, bias=qkv_bias).
        dropout: nn.Dropout(dropout), applied to the attention weights.
        mask: a buffer registered with `register_buffer`, (context_length, context_length).
    """

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float,
                 qkv_bias: bool = False) -> None:
        super().__init__()
        self.d_out = d_out
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        # True on and below the diagonal: the keys a query may see
        self.register_buffer("mask", torch.tril(torch.ones(context_length, context_length)).bool())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Causal self-attention over `x`.

        Args:
            x: (B, T, d_in) with 1 <= T <= context_length.

        Returns:
            The context vectors, (B, T, d_out): row t is a weighted average of the value vectors of
            positions 0..t, with weights softmax(q_t . k_j / sqrt(d_out)) over j <= t (dropout on the
            weights in training mode only).
        """
        # x: (B, T, d_in) -> queries, keys, values: (B, T, d_out); scores, weights: (B, T, T); context: (B, T, d_out)
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)
        attn_scores = queries @ keys.transpose(1, 2)
        future = torch.triu(torch.ones(num_tokens, num_tokens, device=x.device), diagonal=0).bool()
        attn_scores = attn_scores.masked_fill(future, -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        return attn_weights @ values
