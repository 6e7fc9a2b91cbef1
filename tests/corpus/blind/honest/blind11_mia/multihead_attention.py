# Generated from solutions/multihead_attention.py by `grader build`. Your task: replace each
# `raise NotImplementedError(...)` with working code. Keep the names and signatures.
"""Exercise `multihead_attention`: several causal attention heads, first stacked, then fused into one module.

1. `MultiHeadAttentionWrapper` runs `num_heads` independent `CausalAttention` modules (your class from the
   `causal_attention` exercise) on the same input and concatenates their outputs on the last dimension:
   (B, T, d_in) -> (B, T, num_heads * d_out). Each head has its own W_query, W_key and W_value.

2. `MultiHeadAttention` does the same work with ONE projection per role: W_query, W_key and W_value map
   d_in -> d_out, and the d_out features are split into num_heads heads of head_dim = d_out // num_heads:

       (B, T, d_out) -view-> (B, T, H, hd) -transpose(1, 2)-> (B, H, T, hd)
       scores  = q @ k^T / sqrt(hd)                  (B, H, T, T), causal mask, softmax over the keys
       context = dropout(weights) @ v                (B, H, T, hd)
       (B, H, T, hd) -transpose(1, 2)-> (B, T, H, hd) -contiguous().view-> (B, T, d_out) -> out_proj

   Note the scale: each head's dot products have head_dim terms, so divide by sqrt(head_dim), not sqrt(d_out).
   `view(B, H, T, hd)` directly is NOT the same as `view(B, T, H, hd).transpose(1, 2)`: it mixes tokens
   across heads.

Conventions (as in `causal_attention`): a boolean mask is True where a query may attend to a key; the causal
mask is a buffer named `mask` (contents up to you); inputs may be shorter than context_length; dropout acts on
the attention weights and only in training mode.
Do not call F.scaled_dot_product_attention or nn.MultiheadAttention here: they are banned in this exercise.
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
            [CausalAttention(d_in, d_out, context_length, dropout, qkv_bias) for _ in range(num_heads)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Run every head on `x` (B, T, d_in) and concatenate: returns (B, T, num_heads * d_out).

        Features [h * d_out, (h + 1) * d_out) of the output come from head h.
        """
        # num_heads outputs, each (B, T, d_out) -> concatenated on the last dim: (B, T, num_heads * d_out)
        return torch.cat([head(x) for head in self.heads], dim=-1)


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
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        # keep-mask, True = may attend (key j <= query i)
        idx = torch.arange(context_length)
        self.register_buffer("mask", idx[None, :] <= idx[:, None])

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
        H, hd = self.num_heads, self.head_dim

        # split the last axis into heads, then move the head axis in front of the tokens
        queries = self.W_query(x).reshape(B, T, H, hd).transpose(1, 2)
        keys = self.W_key(x).reshape(B, T, H, hd).transpose(1, 2)
        values = self.W_value(x).reshape(B, T, H, hd).transpose(1, 2)

        scores = torch.matmul(queries, keys.transpose(-2, -1)) * hd ** -0.5  # (B, H, T, T)
        keep = self.mask[:T, :T]  # (T, T), broadcasts over B and H
        scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
        weights = torch.softmax(scores, dim=-1)
        weights = self.dropout(weights)

        context = torch.matmul(weights, values)  # (B, H, T, hd)
        context = context.transpose(1, 2).reshape(B, T, self.d_out)  # heads back side by side
        return self.out_proj(context)
