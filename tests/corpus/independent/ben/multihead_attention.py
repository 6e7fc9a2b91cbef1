"""Multi-head attention, one head at a time (ben)."""

from __future__ import annotations

import math

import torch
from torch import nn

from .causal_attention import CausalAttention


class MultiHeadAttentionWrapper(nn.Module):
    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 qkv_bias: bool = False) -> None:
        super().__init__()
        head_list = []
        for _ in range(num_heads):
            head_list.append(CausalAttention(d_in, d_out, context_length, dropout, qkv_bias))
        self.heads = nn.ModuleList(head_list)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outputs = []
        for head in self.heads:
            outputs.append(head(x))
        return torch.cat(outputs, dim=2)


class MultiHeadAttention(nn.Module):
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
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch_size, num_tokens, dimension = x.shape
        assert num_tokens <= self.context_length, (
            f"sequence length {num_tokens} exceeds context_length {self.context_length}")
        queries = self.W_query(x)
        keys = self.W_key(x)
        values = self.W_value(x)
        blocked = self.mask.bool()[:num_tokens, :num_tokens]
        head_outputs = []
        for head in range(self.num_heads):
            start = head * self.head_dim
            stop = start + self.head_dim
            q_head = queries[:, :, start:stop]
            k_head = keys[:, :, start:stop]
            v_head = values[:, :, start:stop]
            scores = torch.matmul(q_head, k_head.transpose(1, 2))
            scores = scores.masked_fill(blocked, -math.inf)
            weights = torch.softmax(scores / math.sqrt(self.head_dim), dim=-1)
            weights = self.dropout(weights)
            head_outputs.append(torch.matmul(weights, v_head))
        context = torch.cat(head_outputs, dim=-1)
        return self.out_proj(context)
