"""Bug: heads split with view(B, H, -1, hd) instead of view(B, T, H, hd).transpose(1, 2): tokens and heads mix (source: seed 004 CrossAttention's view(batch, -1, ...) / misconception #2).

Misconception: heads-no-transpose
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
        q = self.W_query(x).view(B, H, -1, hd)
        k = self.W_key(context).view(B, H, -1, hd)
        v = self.W_value(context).view(B, H, -1, hd)
        scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
        if key_padding_mask is not None:
            scores = scores.masked_fill(~key_padding_mask.view(B, 1, 1, S), float("-inf"))
        weights = self.dropout(torch.softmax(scores, dim=-1))
        out = (weights @ v).transpose(1, 2).contiguous().view(B, L, self.d_model)
        return self.out_proj(out)
