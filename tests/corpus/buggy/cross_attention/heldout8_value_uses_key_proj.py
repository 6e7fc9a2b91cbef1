"""Bug: the values are projected with W_key instead of W_value (a copy-paste slip), so v equals k, W_value is never used and the output is wrong whatever the mask.

Misconception: queries-from-w-key
Held out: yes
Source: https://github.com/stevezheng23/reading_comprehension_tf/pull/284 (fix query/key/value projection matrix reuse); written from scratch
"""

import math

import torch
import torch.nn as nn


class CrossAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, qkv_bias=False):
        super().__init__()
        assert d_model % num_heads == 0, "d_model must be divisible by num_heads"
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.W_query = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.W_key = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.W_value = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.out_proj = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, context, key_padding_mask=None):
        batch_size = x.size(0)
        Q = self.W_query(x).view(batch_size, -1, self.num_heads, self.d_k).transpose(1, 2)
        K = self.W_key(context).view(batch_size, -1, self.num_heads, self.d_k).transpose(1, 2)
        V = self.W_key(context).view(batch_size, -1, self.num_heads, self.d_k).transpose(1, 2)
        scores = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(self.d_k)
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, None, :] == 0, float("-inf"))
        attn = self.dropout(torch.softmax(scores, dim=-1))
        out = torch.matmul(attn, V).transpose(1, 2).contiguous().view(batch_size, -1, self.d_model)
        return self.out_proj(out)
