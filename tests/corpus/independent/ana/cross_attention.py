"""Cross-attention with einsum (ana)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


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

    def forward(self, x: torch.Tensor, context: torch.Tensor,
                key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        q = self.W_query(x).unflatten(-1, (self.num_heads, -1))
        k = self.W_key(context).unflatten(-1, (self.num_heads, -1))
        v = self.W_value(context).unflatten(-1, (self.num_heads, -1))
        logits = torch.einsum("blhd,bshd->bhls", q, k) * q.size(-1) ** -0.5
        if key_padding_mask is not None:
            logits = logits.masked_fill(~key_padding_mask.bool()[:, None, None, :], float("-inf"))
        probs = self.dropout(F.softmax(logits, dim=-1))
        return self.out_proj(torch.einsum("bhls,bshd->blhd", probs, v).flatten(2))
