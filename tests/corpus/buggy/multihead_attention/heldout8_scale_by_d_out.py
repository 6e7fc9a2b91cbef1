"""Bug: MultiHeadAttention scales the scores by 1/sqrt(d_out) instead of 1/sqrt(head_dim), so with more than one head the softmax is too flat.

Misconception: wrong-scale
Held out: yes
Source: seed notebook 003_eef2211e07fb1ee1.txt (its MultiHeadAttention divides by `d_out ** 0.5`); from the reference
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .causal_attention import CausalAttention


class MultiHeadAttentionWrapper(nn.Module):
    """`num_heads` independent causal attention heads whose outputs are concatenated.

    Args:
        d_in: size of each input vector.
        d_out: output size of EACH head (the wrapper returns num_heads * d_out features).
        context_length: the longest sequence accepted.
        dropout: dropout probability on each head's attention weights.
        num_heads: how many heads.
        qkv_bias: whether the heads' projections have a bias.

    Attributes the grader relies on:
        heads: nn.ModuleList of num_heads CausalAttention(d_in, d_out, context_length, dropout, qkv_bias),
            so the parameters are named `heads.0.W_query.weight`, `heads.1.W_key.weight`, ...
    """

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 qkv_bias: bool = False) -> None:
        super().__init__()
        self.heads = nn.ModuleList(
            [CausalAttention(d_in, d_out, context_length, dropout, qkv_bias) for _ in range(num_heads)]
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Run every head on `x` (B, T, d_in) and concatenate: returns (B, T, num_heads * d_out).

        Features [h * d_out, (h + 1) * d_out) of the output come from head h.
        """
        # num_heads outputs, each (B, T, d_out) -> concatenated on the last dim: (B, T, num_heads * d_out)
        return torch.cat([head(x) for head in self.heads], dim=-1)  # num_heads x (B, T, d_out) -> (B, T, H * d_out)


class MultiHeadAttention(nn.Module):
    """Fused multi-head causal self-attention with an output projection.

    Args:
        d_in: size of each input vector.
        d_out: total output size; must be divisible by num_heads (raise otherwise, e.g. with an assert).
        context_length: the longest sequence accepted.
        dropout: dropout probability on the attention weights.
        num_heads: number of heads; head_dim = d_out // num_heads.
        qkv_bias: whether W_query, W_key and W_value have a bias.

    Attributes the grader relies on (names appear in `state_dict()`):
        W_query, W_key, W_value: nn.Linear(d_in, d_out, bias=qkv_bias); head h uses output features
            [h * head_dim, (h + 1) * head_dim) of each.
        out_proj: nn.Linear(d_out, d_out) (with bias), applied to the concatenated heads.
        dropout: nn.Dropout(dropout) on the attention weights.
        mask: the causal mask, a registered buffer.
    """

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 qkv_bias: bool = False) -> None:
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.context_length = context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)  # combines the heads' outputs
        self.dropout = nn.Dropout(dropout)
        # True on and below the diagonal: query i may attend to key j <= i (SDPA convention)
        causal = torch.tril(torch.ones(context_length, context_length, dtype=torch.bool))  # (ctx, ctx)
        self.register_buffer("mask", causal)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Multi-head causal self-attention over `x`.

        Args:
            x: (B, T, d_in) with 1 <= T <= context_length.

        Returns:
            (B, T, d_out): out_proj applied to the concatenation of the num_heads head outputs, where head h
            is causal attention with queries/keys/values = features [h * head_dim, (h + 1) * head_dim) of
            W_query(x)/W_key(x)/W_value(x), scaled by 1/sqrt(head_dim).
        """
        # queries, keys, values: (B, T, d_out) -> (B, T, H, hd) -> (B, H, T, hd), with H = num_heads, hd = head_dim
        # scores, weights: (B, H, T, T); context: (B, H, T, hd) -> (B, T, H, hd) -> (B, T, d_out) -> out_proj
        B, T, _ = x.shape
        assert T <= self.context_length, f"sequence length {T} exceeds context_length {self.context_length}"
        H, hd = self.num_heads, self.head_dim

        queries = self.W_query(x).view(B, T, H, hd).transpose(1, 2)  # (B, T, d_out) -> (B, T, H, hd) -> (B, H, T, hd)
        keys = self.W_key(x).view(B, T, H, hd).transpose(1, 2)  # (B, H, T, hd)
        values = self.W_value(x).view(B, T, H, hd).transpose(1, 2)  # (B, H, T, hd)

        scores = queries @ keys.transpose(2, 3)  # (B, H, T, hd) @ (B, H, hd, T) -> (B, H, T, T)
        allowed = self.mask[:T, :T]  # (T, T), broadcast over B and H
        scores = scores.masked_fill(~allowed, float("-inf"))  # block every key j > i
        weights = torch.softmax(scores / math.sqrt(self.d_out), dim=-1)  # (B, H, T, T)
        weights = self.dropout(weights)  # training mode only

        context = (weights @ values).transpose(1, 2)  # (B, H, T, hd) -> (B, T, H, hd)
        context = context.contiguous().view(B, T, self.d_out)  # (B, T, H, hd) -> (B, T, d_out)
        return self.out_proj(context)  # (B, T, d_out)
