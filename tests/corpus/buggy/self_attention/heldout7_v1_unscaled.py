"""Bug: SelfAttentionV1 never divides the scores by sqrt(d_out), so its softmax is far too peaked and disagrees with V2.

Misconception: wrong-scale
Held out: yes
Source: https://github.com/FareedKhan-dev/train-llm-from-scratch/pull/3 (attention scaling factor wrong/missing) and rasbt/LLMs-from-scratch ch03 3.3 vs 3.4 (unscaled then scaled scores); written from scratch
"""

from __future__ import annotations

import math

import torch
from torch import nn


class SelfAttentionV1(nn.Module):
    """Self-attention with raw (d_in, d_out) parameters."""

    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__()
        self.W_query = nn.Parameter(torch.rand(d_in, d_out))
        self.W_key = nn.Parameter(torch.rand(d_in, d_out))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = x @ self.W_query, x @ self.W_key, x @ self.W_value
        attn_scores = q @ k.transpose(-2, -1)
        attn_weights = torch.softmax(attn_scores, dim=-1)
        return attn_weights @ v


class SelfAttentionV2(nn.Module):
    """Self-attention with nn.Linear projections."""

    def __init__(self, d_in: int, d_out: int, qkv_bias: bool = False) -> None:
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)
        attn_scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])
        return torch.softmax(attn_scores, dim=-1) @ v
