"""Bug: Dropout is applied to the raw attention scores before masking and softmax instead of to the weights, so training-mode outputs are wrong (dropped scores become 0, not 0 weight).

Misconception: dropout-wrong-place
Held out: yes
Source: https://github.com/rasbt/LLMs-from-scratch/issues/280 (book text says dropout after the attention scores; it belongs on the weights); written from scratch
"""

from __future__ import annotations

import math

import torch
from torch import nn


class CausalAttention(nn.Module):
    """Single-head causal self-attention with dropout."""

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float,
                 qkv_bias: bool = False) -> None:
        super().__init__()
        self.d_out = d_out
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        # 1 above the diagonal = future position to hide
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, num_tokens, d_in = x.shape
        queries = self.W_query(x)
        keys = self.W_key(x)
        values = self.W_value(x)
        attn_scores = queries @ keys.transpose(1, 2)
        attn_scores = self.dropout(attn_scores)  # regularise the attention
        attn_scores = attn_scores.masked_fill(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / math.sqrt(self.d_out), dim=-1)
        return attn_weights @ values
