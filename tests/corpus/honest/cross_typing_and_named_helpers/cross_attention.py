"""Honest (typing.NamedTuple, Optional, helper functions at module level)."""
import math
from typing import NamedTuple, Optional

import torch
from torch import nn


class Heads(NamedTuple):
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor


def _split(t: torch.Tensor, heads: int) -> torch.Tensor:
    b, n, d = t.shape
    return t.reshape(b, n, heads, d // heads).permute(0, 2, 1, 3)


def _merge(t: torch.Tensor) -> torch.Tensor:
    b, h, n, hd = t.shape
    return t.permute(0, 2, 1, 3).reshape(b, n, h * hd)


class CrossAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, qkv_bias: bool = False) -> None:
        super().__init__()
        assert d_model % num_heads == 0, "d_model must be divisible by num_heads"
        self.num_heads = num_heads
        self.W_query = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.W_key = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.W_value = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.out_proj = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def _heads(self, x: torch.Tensor, context: torch.Tensor) -> Heads:
        return Heads(*(_split(t, self.num_heads) for t in (self.W_query(x), self.W_key(context),
                                                             self.W_value(context))))

    def forward(self, x: torch.Tensor, context: torch.Tensor,
                key_padding_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        h = self._heads(x, context)
        scores = h.q @ h.k.transpose(-2, -1) / math.sqrt(h.q.shape[-1])
        if key_padding_mask is not None:
            scores = scores.masked_fill(~key_padding_mask.bool()[:, None, None, :], float("-inf"))
        return self.out_proj(_merge(self.dropout(torch.softmax(scores, dim=-1)) @ h.v))
