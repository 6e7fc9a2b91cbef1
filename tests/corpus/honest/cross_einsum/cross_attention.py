"""Honest (einsum, a padding mask as an additive bias)."""
import torch
from torch import nn


class CrossAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, qkv_bias=False):
        super().__init__()
        assert d_model % num_heads == 0
        self.h = num_heads
        self.W_query = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.W_key = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.W_value = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.out_proj = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, context, key_padding_mask=None):
        q = self.W_query(x).unflatten(-1, (self.h, -1))
        k = self.W_key(context).unflatten(-1, (self.h, -1))
        v = self.W_value(context).unflatten(-1, (self.h, -1))
        s = torch.einsum("blhd,bshd->bhls", q, k) / q.shape[-1] ** 0.5
        if key_padding_mask is not None:
            bias = torch.zeros(key_padding_mask.shape, dtype=s.dtype, device=s.device)
            s = s + bias.masked_fill(~key_padding_mask.bool(), float("-inf"))[:, None, None, :]
        w = self.dropout(torch.softmax(s, dim=-1))
        return self.out_proj(torch.einsum("bhls,bshd->blhd", w, v).flatten(-2))
