"""Cross-attention, one head at a time (ben)."""

from __future__ import annotations

import math

import torch
from torch import nn


class CrossAttention(nn.Module):
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
        queries = self.W_query(x)
        keys = self.W_key(context)
        values = self.W_value(context)
        head_outputs = []
        for head in range(self.num_heads):
            start = head * self.head_dim
            stop = start + self.head_dim
            scores = torch.matmul(queries[..., start:stop], keys[..., start:stop].transpose(1, 2))
            scores = scores / math.sqrt(self.head_dim)
            if key_padding_mask is not None:
                keep = key_padding_mask.bool().unsqueeze(1)
                scores = scores.masked_fill(keep.logical_not(), -math.inf)
            weights = torch.softmax(scores, dim=-1)
            weights = self.dropout(weights)
            head_outputs.append(torch.matmul(weights, values[..., start:stop]))
        combined = torch.cat(head_outputs, dim=-1)
        return self.out_proj(combined)
