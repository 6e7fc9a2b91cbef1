"""Bug: the wrapper builds its heads with [CausalAttention(...)] * num_heads, so every head is the same module with shared weights and all heads output the same thing.

Misconception: heads-shared
Held out: yes
Source: pitfall: list multiplication repeats one object; written from scratch
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .causal_attention import CausalAttention


class MultiHeadAttentionWrapper(nn.Module):
    """`num_heads` independent causal attention heads whose outputs are concatenated.

    Args:
        d_in: size of each input vector.
        d_out: output size of EACH head (the wrapper returns num_heads * d_out features).
        context_length: the longest sequence accepted.
        dropout: dropout probability on each head's attention weights.
        num_heads: how many heads.
        qkv_bias: whether the heads' projections have a bias.

    Attributes the grader relies on:
        heads: nn.ModuleList of num_heads CausalAttention(d_in, d_out, context_length, dropout, qkv_bias),
            so the parameters are named `heads.0.W_query.weight`, `heads.1.W_key.weight`, ...
    """

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 qkv_bias: bool = False) -> None:
        super().__init__()
        self.heads = nn.ModuleList(
            [CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)] * num_heads
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Run every head on `x` (B, T, d_in) and concatenate: returns (B, T, num_heads * d_out).

        Features [h * d_out, (h + 1) * d_out) of the output come from head h.
        """
        # num_heads outputs, each (B, T, d_out) -> concatenated on the last dim: (B, T, num_heads * d_out)
        outs = [h(x) for h in self.heads]
        return torch.cat(outs, dim=-1)


class MultiHeadAttention(nn.Module):
    """Fused multi-head causal self-attention with an output projection.

    Args:
        d_in: size of each input vector.
        d_out: total output size; must be divisible by num_heads (raise otherwise, e.g. with an assert).
        context_length: the longest sequence accepted.
        dropout: dropout probability on the attention weights.
        num_heads: number of heads; head_dim = d_out // num_heads.
        qkv_bias: whether W_query, W_key and W_value have a bias.

    Attributes the grader relies on (names appear in `state_dict()`):
        W_query, W_key, W_value: nn.Linear(d_in, d_out, bias=qkv_bias); head h uses output features
            [h * head_dim, (h + 1) * head_dim) of each.
        out_proj: nn.Linear(d_out, d_out) (with bias), applied to the concatenated heads.
        dropout: nn.Dropout(dropout) on the attention weights.
        mask: the causal mask, a registered buffer.
    """

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 qkv_bias: bool = False) -> None:
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.tril(torch.ones(context_length, context_length)).bool())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Multi-head causal self-attention over `x`.

        Args:
            x: (B, T, d_in) with 1 <= T <= context_length.

        Returns:
            (B, T, d_out): out_proj applied to the concatenation of the num_heads head outputs, where head h
            is causal attention with queries/keys/values = features [h * head_dim, (h + 1) * head_dim) of
            W_query(x)/W_key(x)/W_value(x), scaled by 1/sqrt(head_dim).
        """
        # queries, keys, values: (B, T, d_out) -> (B, T, H, hd) -> (B, H, T, hd), with H = num_heads, hd = head_dim
        # scores, weights: (B, H, T, T); context: (B, H, T, hd) -> (B, T, H, hd) -> (B, T, d_out) -> out_proj
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        queries = self.W_query(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        values = self.W_value(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        attn_scores = queries @ keys.transpose(2, 3)
        mask_bool = self.mask[:num_tokens, :num_tokens]
        attn_scores.masked_fill_(~mask_bool, -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        context_vec = (attn_weights @ values).transpose(1, 2)
        context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context_vec)
