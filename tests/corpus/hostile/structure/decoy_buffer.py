"""Attack (causal_attention): register a decoy buffer named `mask` that forward never reads, and attend with a
plain-attribute mask: the registries show a `mask`, but zeroing it changes nothing, so it is no buffer of the
computation and the "mask is a buffer" point is lost.
Caught: test test_mask_is_a_buffer_not_a_parameter."""
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
        self.register_buffer("mask", torch.ones(1, dtype=torch.bool))  # a decoy
        self.causal = torch.tril(torch.ones(context_length, context_length, dtype=torch.bool))

    def _apply(self, fn, recurse=True):  # the plain attribute follows .to() as a buffer would
        self.causal = fn(self.causal)
        return super()._apply(fn, recurse)

    def forward(self, x):
        T = x.shape[1]
        scores = self.W_query(x) @ self.W_key(x).transpose(1, 2)
        scores = scores.masked_fill(~self.causal[:T, :T], float("-inf"))
        weights = self.dropout(torch.softmax(scores / math.sqrt(self.d_out), dim=-1))
        return weights @ self.W_value(x)
