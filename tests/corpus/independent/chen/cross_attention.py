"""Cross-attention by reshape and permute (chen)."""

from __future__ import annotations

import math

import torch
from torch import nn


class CrossAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, qkv_bias: bool = False) -> None:
        super().__init__()
        assert d_model % num_heads == 0, "d_model must be divisible by num_heads"
        self.h = num_heads
        self.W_query, self.W_key, self.W_value = (nn.Linear(d_model, d_model, qkv_bias) for _ in range(3))
        self.out_proj = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def split(self, t: torch.Tensor) -> torch.Tensor:
        return t.reshape(*t.shape[:2], self.h, -1).permute(0, 2, 1, 3)

    def forward(self, x: torch.Tensor, context: torch.Tensor,
                key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        q, k, v = self.split(self.W_query(x)), self.split(self.W_key(context)), self.split(self.W_value(context))
        s = q @ k.mT / math.sqrt(q.shape[-1])
        if key_padding_mask is not None:
            s = s + torch.log(key_padding_mask.to(s.dtype)).reshape(s.shape[0], 1, 1, -1)
        out = self.dropout(s.softmax(-1)) @ v
        return self.out_proj(out.permute(0, 2, 1, 3).flatten(2))
