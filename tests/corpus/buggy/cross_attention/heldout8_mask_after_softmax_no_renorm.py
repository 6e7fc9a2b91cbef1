"""Bug: padding is removed by multiplying the softmax weights by the key_padding_mask after the softmax, without renormalising, so rows with padding have weights summing to less than 1 (output shrunk towards 0); without a mask it is correct.

Misconception: mask-after-softmax
Held out: yes
Source: seed notebook 001_6d8b84533e267197.txt (its `masked_simple = attn_weights*mask_simple` step, here without the following renormalisation); written from scratch
"""

import math

import torch
from torch import nn


class CrossAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, qkv_bias: bool = False) -> None:
        super().__init__()
        assert d_model % num_heads == 0, "d_model must be divisible by num_heads"
        self.d_model, self.num_heads = d_model, num_heads
        self.head_dim = d_model // num_heads
        self.W_query = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.W_key = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.W_value = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.out_proj = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, context, key_padding_mask=None):
        B, L, D = x.shape
        S = context.shape[1]
        H, hd = self.num_heads, self.head_dim
        q = self.W_query(x).reshape(B, L, H, hd).permute(0, 2, 1, 3)
        k = self.W_key(context).reshape(B, S, H, hd).permute(0, 2, 1, 3)
        v = self.W_value(context).reshape(B, S, H, hd).permute(0, 2, 1, 3)
        weights = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(hd), dim=-1)  # (B, H, L, S)
        if key_padding_mask is not None:
            weights = weights * key_padding_mask[:, None, None, :].to(weights.dtype)  # zero the padding
        weights = self.dropout(weights)
        out = (weights @ v).permute(0, 2, 1, 3).reshape(B, L, D)
        return self.out_proj(out)
