"""Attack (causal_attention): keep the causal mask as a plain attribute and override `named_buffers()` and
`state_dict()` so that they claim a registered `mask` (the second generation's trick for the "mask is a buffer"
point). Structure is read from nn.Module's registries, never asked of these methods: the point is lost.
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
        self.causal = torch.tril(torch.ones(context_length, context_length, dtype=torch.bool))  # a plain attribute

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from super().named_buffers(prefix, recurse, remove_duplicate)
        yield (prefix + "mask" if not prefix else f"{prefix}.mask"), self.causal

    def state_dict(self, *args, **kwargs):
        state = super().state_dict(*args, **kwargs)
        state["mask"] = self.causal
        return state

    def _apply(self, fn, recurse=True):  # the plain attribute follows .to() as a buffer would
        self.causal = fn(self.causal)
        return super()._apply(fn, recurse)

    def forward(self, x):
        T = x.shape[1]
        scores = self.W_query(x) @ self.W_key(x).transpose(1, 2)
        scores = scores.masked_fill(~self.causal[:T, :T], float("-inf"))
        weights = self.dropout(torch.softmax(scores / math.sqrt(self.d_out), dim=-1))
        return weights @ self.W_value(x)
