"""Honest (the mask buffer holds 0 and -inf, added to the scores)."""
import math

import torch
from torch import nn


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.d_out = d_out
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        blocked = torch.triu(torch.ones(context_length, context_length, dtype=torch.bool), diagonal=1)
        self.register_buffer("mask", torch.zeros(context_length, context_length).masked_fill(blocked, float("-inf")))

    def forward(self, x):
        T = x.shape[1]
        scores = self.W_query(x) @ self.W_key(x).transpose(1, 2) / math.sqrt(self.d_out)
        scores = scores + self.mask[:T, :T].to(scores.dtype)
        return self.dropout(torch.softmax(scores, dim=-1)) @ self.W_value(x)
