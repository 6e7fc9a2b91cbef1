"""Bug: softmax over the query axis (dim=-2) instead of the keys (misconception #1).

Misconception: softmax-wrong-dim
"""

import math

import torch
from torch import nn


class CrossAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, qkv_bias=False):
        super().__init__()
        assert d_model % num_heads == 0
        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.W_query = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.W_key = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.W_value = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.out_proj = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, context, key_padding_mask=None):
        B, L, _ = x.shape
        S = context.shape[1]
        H, hd = self.num_heads, self.head_dim
        q = self.W_query(x).view(B, L, H, hd).transpose(1, 2)
        k = self.W_key(context).view(B, S, H, hd).transpose(1, 2)
        v = self.W_value(context).view(B, S, H, hd).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
        if key_padding_mask is not None:
            scores = scores.masked_fill(~key_padding_mask.view(B, 1, 1, S), float("-inf"))
        weights = self.dropout(torch.softmax(scores, dim=-2))
        out = (weights @ v).transpose(1, 2).contiguous().view(B, L, self.d_model)
        return self.out_proj(out)
