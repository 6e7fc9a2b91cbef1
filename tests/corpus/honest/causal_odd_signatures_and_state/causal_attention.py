"""Honest (keyword-only arguments, **kwargs in forward, a custom extra_repr and a train() override that
still calls nn.Module's)."""
import math

import torch
from torch import nn


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False, *, mask_value=float("-inf"), **extra):
        super().__init__()
        self.mask_value = mask_value
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.tril(torch.ones(context_length, context_length)).to(torch.bool))
        self.calls = 0

    def train(self, mode: bool = True):
        self.calls = 0
        return super().train(mode)

    def extra_repr(self) -> str:
        return f"mask_value={self.mask_value}"

    def forward(self, x, *unused, **kwargs):
        self.calls += 1
        T = x.shape[-2]
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)
        scores = q.matmul(k.transpose(-2, -1)).div(math.sqrt(k.shape[-1]))
        scores = scores.masked_fill(self.mask[:T, :T].logical_not(), self.mask_value)
        return self.dropout(scores.softmax(dim=-1)).matmul(v)
