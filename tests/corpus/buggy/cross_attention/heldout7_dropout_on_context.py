"""Bug: Dropout is applied to the attended values (weights @ v) instead of to the attention weights, so training-mode outputs differ.

Misconception: dropout-wrong-place
Held out: yes
Source: https://github.com/rasbt/LLMs-from-scratch/issues/280 (dropout after the weights vs after multiplying by the values); written from scratch
"""

from __future__ import annotations

import math

import torch
from torch import nn


class CrossAttention(nn.Module):
    """Multi-head cross-attention: queries from x, keys and values from context."""

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, qkv_bias: bool = False) -> None:
        super().__init__()
        assert d_model % num_heads == 0, "d_model must be divisible by num_heads"
        self.h = num_heads
        self.d_k = d_model // num_heads
        self.W_query = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.W_key = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.W_value = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.out_proj = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def _heads(self, t: torch.Tensor) -> torch.Tensor:
        return t.view(t.shape[0], t.shape[1], self.h, self.d_k).transpose(1, 2)

    def forward(self, x: torch.Tensor, context: torch.Tensor,
                key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        q = self._heads(self.W_query(x))
        k = self._heads(self.W_key(context))
        v = self._heads(self.W_value(context))
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.d_k)
        if key_padding_mask is not None:
            scores = scores.masked_fill(~key_padding_mask[:, None, None, :], float("-inf"))
        attn = torch.softmax(scores, dim=-1)
        out = self.dropout(torch.matmul(attn, v))  # dropout on the attended values
        out = out.transpose(1, 2).reshape(x.shape[0], x.shape[1], -1)
        return self.out_proj(out)
