"""Bug: the key_padding_mask is applied with nn.MultiheadAttention's convention (True = ignore): -inf goes where the mask is True, so real tokens are blocked, padding is attended, and an all-real row becomes NaN.

Misconception: mask-inverted
Held out: yes
Source: https://github.com/lucidrains/halonet-pytorch/pull/6 (fix: invert attention padding mask; masked_fill on the valid positions); from the reference
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
        S = context.shape[1]  # the key length comes from the context, never from x
        H, hd = self.num_heads, self.head_dim

        q = self.W_query(x).view(B, L, H, hd).transpose(1, 2)  # (B, H, L, hd)
        k = self.W_key(context).view(B, S, H, hd).transpose(1, 2)  # (B, H, S, hd)
        v = self.W_value(context).view(B, S, H, hd).transpose(1, 2)  # (B, H, S, hd)

        scores = q @ k.transpose(-2, -1) / math.sqrt(hd)  # (B, H, L, S)
        if key_padding_mask is not None:
            keep = key_padding_mask.bool().view(B, 1, 1, S)  # (B, 1, 1, S): broadcast over heads and queries
            scores = scores.masked_fill(keep, float("-inf"))
        weights = torch.softmax(scores, dim=-1)  # (B, H, L, S): each row sums to 1 over the keys
        weights = self.dropout(weights)

        out = (weights @ v).transpose(1, 2).contiguous().view(B, L, self.d_model)  # (B, L, H, hd) -> (B, L, d_model)
        return self.out_proj(out)
