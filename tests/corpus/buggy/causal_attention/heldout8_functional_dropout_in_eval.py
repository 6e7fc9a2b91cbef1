"""Bug: the attention weights go through `F.dropout(weights, p)` whose `training` argument defaults to True, so dropout (zeroing and 1/(1-p) rescaling) also happens after `.eval()`.

Misconception: dropout-in-eval
Held out: yes
Source: https://github.com/rixwew/pytorch-fm/issues/21 (F.dropout without training=self.training keeps dropping in eval mode); from the reference
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
        self.context_length = context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        # True on and below the diagonal: query i may attend to key j <= i (SDPA convention)
        causal = torch.tril(torch.ones(context_length, context_length, dtype=torch.bool))  # (ctx, ctx)
        self.register_buffer("mask", causal)

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
        B, T, _ = x.shape
        assert T <= self.context_length, f"sequence length {T} exceeds context_length {self.context_length}"
        queries = self.W_query(x)  # (B, T, d_out)
        keys = self.W_key(x)  # (B, T, d_out)
        values = self.W_value(x)  # (B, T, d_out)

        scores = queries @ keys.transpose(1, 2)  # (B, T, d_out) @ (B, d_out, T) -> (B, T, T)
        allowed = self.mask[:T, :T]  # (T, T): the top-left corner, for inputs shorter than context_length
        scores = scores.masked_fill(~allowed, float("-inf"))  # block every key j > i
        weights = torch.softmax(scores / math.sqrt(self.d_out), dim=-1)  # (B, T, T), rows sum to 1
        weights = nn.functional.dropout(weights, p=self.dropout.p)  # dropout on the attention weights

        return weights @ values  # (B, T, T) @ (B, T, d_out) -> (B, T, d_out)
