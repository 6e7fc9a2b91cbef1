# Generated from solutions/cross_attention.py by `grader build`. Your task: replace each
# `raise NotImplementedError(...)` with working code. Keep the names and signatures.
"""Exercise `cross_attention`: multi-head attention whose queries and keys come from different sequences.

In an encoder-decoder (or a text model reading an image), the decoder sequence `x` (B, L, d_model)
asks the questions and a second sequence `context` (B, S, d_model) supplies the answers: queries are
projected from `x`, keys and values from `context`. L and S are independent (L = 3, S = 5 is fine),
so the score matrix of every head is (L, S), never (L, L). There is no causal mask: every query may
look at every real context token.

Conventions (the same as `F.scaled_dot_product_attention`):
- `key_padding_mask` is a bool tensor (B, S): True = a real context token (attend to it),
  False = padding (it gets zero attention weight and has no influence on the output).
  Note that `nn.MultiheadAttention`'s `key_padding_mask` uses the OPPOSITE convention (True = ignore).
- Scores are scaled by 1/sqrt(head_dim), with head_dim = d_model // num_heads.
- Dropout acts on the attention weights, and only in training mode.
Do not call F.scaled_dot_product_attention or nn.MultiheadAttention here: they are banned in this exercise.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class CrossAttention(nn.Module):
    """Multi-head cross-attention: queries from `x`, keys and values from `context`.

    Attributes (the names are part of the contract: tests load weights by name):
        W_query, W_key, W_value: nn.Linear(d_model, d_model, bias=qkv_bias)
        out_proj:                nn.Linear(d_model, d_model) (with bias)
        dropout:                 nn.Dropout(dropout), applied to the attention weights
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, qkv_bias: bool = False) -> None:
        super().__init__()
        assert d_model % num_heads == 0, "d_model must be divisible by num_heads"
        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.W_query = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.W_key = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.W_value = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.out_proj = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, context: torch.Tensor,
                key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Attend from every position of `x` to the (real) positions of `context`.

        Args:
            x: (B, L, d_model), the sequence the queries come from.
            context: (B, S, d_model), the sequence the keys and values come from (S may differ from L).
            key_padding_mask: None, or a bool tensor (B, S): True = real token, False = padding.
                Every row has at least one True.

        Returns:
            (B, L, d_model): out_proj of the concatenated heads' context vectors.
        """
        # queries from x: (B, L, d_model) -> (B, L, H, hd) -> (B, H, L, hd); keys, values from context: (B, H, S, hd)
        # scores, weights: (B, H, L, S); key_padding_mask: (B, S) -> (B, 1, 1, S); context: (B, H, L, hd) -> (B, L, d_model)
        B, L, _ = x.shape
        S = context.shape[1]
        H, hd = self.num_heads, self.head_dim

        queries = self.W_query(x).reshape(B, L, H, hd).transpose(1, 2)        # (B, H, L, hd)
        keys = self.W_key(context).reshape(B, S, H, hd).transpose(1, 2)       # (B, H, S, hd)
        values = self.W_value(context).reshape(B, S, H, hd).transpose(1, 2)   # (B, H, S, hd)

        scores = torch.matmul(queries, keys.transpose(-2, -1)) * hd ** -0.5  # (B, H, L, S)
        if key_padding_mask is not None:
            keep = key_padding_mask[:, None, None, :]  # (B, 1, 1, S): same for every head and query
            scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
        weights = torch.softmax(scores, dim=-1)
        weights = self.dropout(weights)

        out = torch.matmul(weights, values)  # (B, H, L, hd)
        out = out.transpose(1, 2).reshape(B, L, self.d_model)
        return self.out_proj(out)
