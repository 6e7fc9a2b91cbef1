"""Honest (a frozen dataclass for the configuration, object.__setattr__ in __post_init__ with a literal name)."""
from dataclasses import dataclass, field

import torch
from torch import nn


@dataclass(frozen=True)
class _Config:
    d_in: int
    d_out: int
    context_length: int
    dropout: float
    qkv_bias: bool = False
    scale: float = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "scale", self.d_out ** -0.5)


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.cfg = _Config(d_in, d_out, context_length, dropout, qkv_bias)
        self.W_query, self.W_key, self.W_value = (nn.Linear(d_in, d_out, bias=qkv_bias) for _ in range(3))
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.ones(context_length, context_length, dtype=torch.bool).tril())

    def forward(self, x):
        T = x.size(1)
        s = (self.W_query(x) @ self.W_key(x).mT) * self.cfg.scale
        s = s.masked_fill(self.mask[:T, :T].logical_not(), float("-inf"))
        return self.dropout(s.softmax(dim=-1)) @ self.W_value(x)
