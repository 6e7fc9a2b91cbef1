"""Bug: the future positions are filled with -1e-9 (a typo for -1e9) instead of -inf, which is practically 0, so the causal mask does nothing and every token attends to the future.

Misconception: mask-fill-finite
Held out: yes
Source: https://github.com/Shujun-He/RibonanzaNet/issues/5 (masked attention scores filled with -1e-9, 'basically 0', so the mask has no effect); written from scratch
"""

import torch
import torch.nn as nn


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.d_out = d_out
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        # 1 = may attend (lower triangle incl. diagonal)
        self.register_buffer("mask", torch.tril(torch.ones(context_length, context_length)))

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        q = self.W_query(x)
        k = self.W_key(x)
        v = self.W_value(x)

        att = q @ k.transpose(1, 2) / (self.d_out ** 0.5)
        att = att.masked_fill(self.mask[:num_tokens, :num_tokens] == 0, -1e-9)
        att = torch.softmax(att, dim=-1)
        att = self.dropout(att)
        return att @ v
