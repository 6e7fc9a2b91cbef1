"""Self-attention with einsum (ana)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class SelfAttentionV1(nn.Module):
    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__()
        self.W_query = nn.Parameter(torch.rand(d_in, d_out))
        self.W_key = nn.Parameter(torch.rand(d_in, d_out))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = torch.einsum("...ti,io->...to", x, self.W_query)
        k = torch.einsum("...ti,io->...to", x, self.W_key)
        v = torch.einsum("...ti,io->...to", x, self.W_value)
        return F.softmax(q @ k.mT * k.size(-1) ** -0.5, -1) @ v


class SelfAttentionV2(nn.Module):
    def __init__(self, d_in: int, d_out: int, qkv_bias: bool = False) -> None:
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)
        return F.softmax(q @ k.mT * k.size(-1) ** -0.5, -1) @ v
