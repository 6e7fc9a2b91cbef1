"""Bug: the padding mask is broadcast as (B, 1, S, 1), which masks query rows instead of key columns, so padding still gets weight and whole rows become NaN (or a shape error when L != S).

Misconception: mask-broadcast
Held out: yes
Source: pitfall: unsqueeze on the wrong axis when broadcasting a (B, S) mask; written from scratch
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
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
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
        batch_size = x.size(0)
        Q = self.W_query(x).view(batch_size, -1, self.num_heads, self.d_k).transpose(1, 2)
        K = self.W_key(context).view(batch_size, -1, self.num_heads, self.d_k).transpose(1, 2)
        V = self.W_value(context).view(batch_size, -1, self.num_heads, self.d_k).transpose(1, 2)
        scores = torch.matmul(Q, K.transpose(-2, -1)) / (self.d_k ** 0.5)
        if key_padding_mask is not None:
            pad = key_padding_mask[:, None, :, None]  # (B, 1, S, 1)
            scores = scores.masked_fill(pad == 0, float("-inf"))
        attention_weights = self.dropout(torch.softmax(scores, dim=-1))
        output = torch.matmul(attention_weights, V)
        output = output.transpose(1, 2).contiguous().view(batch_size, -1, self.num_heads * self.d_k)
        return self.out_proj(output)
