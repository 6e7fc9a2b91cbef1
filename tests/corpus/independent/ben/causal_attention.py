"""Causal attention with the book's float mask above the diagonal (ben)."""

from __future__ import annotations

import math

import torch
from torch import nn


class CausalAttention(nn.Module):
    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, qkv_bias: bool = False) -> None:
        super().__init__()
        self.d_out = d_out
        self.context_length = context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        upper = torch.triu(torch.ones(context_length, context_length), diagonal=1)
        self.register_buffer("mask", upper)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch_size, num_tokens, dimension = x.shape
        assert num_tokens <= self.context_length, (
            f"sequence length {num_tokens} exceeds context_length {self.context_length}")
        queries = self.W_query(x)
        keys = self.W_key(x)
        values = self.W_value(x)
        attention_scores = torch.matmul(queries, keys.transpose(-1, -2))
        blocked = self.mask.bool()[:num_tokens, :num_tokens]
        attention_scores = attention_scores.masked_fill(blocked, -math.inf)
        attention_weights = torch.softmax(attention_scores / keys.shape[-1] ** 0.5, dim=-1)
        attention_weights = self.dropout(attention_weights)
        context = torch.matmul(attention_weights, values)
        return context
