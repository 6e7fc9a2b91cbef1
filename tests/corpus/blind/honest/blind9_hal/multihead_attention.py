# Generated from solutions/multihead_attention.py by `grader build`. Your task: replace each
# `raise NotImplementedError(...)` with working code. Keep the names and signatures.
"""Exercise `multihead_attention`: several causal attention heads, first stacked, then fused into one module.

1. `MultiHeadAttentionWrapper` runs `num_heads` independent `CausalAttention` modules (your class from the
   `causal_attention` exercise) on the same input and concatenates their outputs on the last dimension:
   (B, T, d_in) -> (B, T, num_heads * d_out). Each head has its own W_query, W_key and W_value.

2. `MultiHeadAttention` does the same work with ONE projection per role: W_query, W_key and W_value map
   d_in -> d_out, and the d_out features are split into num_heads heads of head_dim = d_out // num_heads:

       (B, T, d_out) -view-> (B, T, H, hd) -transpose(1, 2)-> (B, H, T, hd)
       scores  = q @ k^T / sqrt(hd)                  (B, H, T, T), causal mask, softmax over the keys
       context = dropout(weights) @ v                (B, H, T, hd)
       (B, H, T, hd) -transpose(1, 2)-> (B, T, H, hd) -contiguous().view-> (B, T, d_out) -> out_proj

   Note the scale: each head's dot products have head_dim terms, so divide by sqrt(head_dim), not sqrt(d_out).
   `view(B, H, T, hd)` directly is NOT the same as `view(B, T, H, hd).transpose(1, 2)`: it mixes tokens
   across heads.

Conventions (as in `causal_attention`): a boolean mask is True where a query may attend to a key; the causal
mask is a buffer named `mask` (contents up to you); inputs may be shorter than context_length; dropout acts on
the attention weights and only in training mode.
Do not call F.scaled_dot_product_attention or nn.MultiheadAttention here: they are banned in this exercise.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .causal_attention import CausalAttention
from .masks import causal_mask
from .softmax import softmax_stable


def _check_int_at_least_one(value: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")
    return int(value)


def _check_dropout(value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"dropout must be a real number, got {type(value).__name__}")
    if not 0.0 <= float(value) < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {value}")
    return float(value)


def _check_sequence(x: torch.Tensor, d_in: int, context_length: int) -> None:
    """x must be a floating point (B, T, d_in) tensor with 1 <= T <= context_length."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 3:
        raise ValueError(f"x must have shape (B, T, d_in), got {tuple(x.shape)}")
    if not torch.is_floating_point(x):
        raise TypeError(f"x must be a floating point tensor, got dtype {x.dtype}")
    if x.shape[-1] != d_in:
        raise ValueError(f"x has {x.shape[-1]} features, expected d_in={d_in}")
    if not 1 <= x.shape[1] <= context_length:
        raise ValueError(f"sequence length T={x.shape[1]} must be in [1, context_length={context_length}]")


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
        num_heads = _check_int_at_least_one(num_heads, "num_heads")
        self.num_heads = num_heads
        # CausalAttention validates d_in, d_out, context_length, dropout and qkv_bias itself
        self.heads = nn.ModuleList(
            [CausalAttention(d_in, d_out, context_length, dropout, qkv_bias) for _ in range(num_heads)]
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Run every head on `x` (B, T, d_in) and concatenate: returns (B, T, num_heads * d_out).

        Features [h * d_out, (h + 1) * d_out) of the output come from head h.
        """
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
        # num_heads outputs, each (B, T, d_out) -> concatenated on the last dim: (B, T, num_heads * d_out)
        head_outputs = [head(x) for head in self.heads]
        concatenated = torch.cat(head_outputs, dim=-1)
        return concatenated


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
        d_in = _check_int_at_least_one(d_in, "d_in")
        d_out = _check_int_at_least_one(d_out, "d_out")
        context_length = _check_int_at_least_one(context_length, "context_length")
        num_heads = _check_int_at_least_one(num_heads, "num_heads")
        dropout = _check_dropout(dropout)
        if not isinstance(qkv_bias, bool):
            raise TypeError(f"qkv_bias must be a bool, got {type(qkv_bias).__name__}")
        if d_out % num_heads != 0:
            raise ValueError(f"d_out={d_out} must be divisible by num_heads={num_heads}")

        self.d_in = d_in
        self.d_out = d_out
        self.context_length = context_length
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        # keep-mask: True where query i may attend to key j (j <= i)
        self.register_buffer("mask", causal_mask(context_length))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Multi-head causal self-attention over `x`.

        Args:
            x: (B, T, d_in) with 1 <= T <= context_length.

        Returns:
            (B, T, d_out): out_proj applied to the concatenation of the num_heads head outputs, where head h
            is causal attention with queries/keys/values = features [h * head_dim, (h + 1) * head_dim) of
            W_query(x)/W_key(x)/W_value(x), scaled by 1/sqrt(head_dim).
        """
        _check_sequence(x, self.W_query.in_features, int(self.mask.shape[0]))
        batch_size, num_tokens, _ = x.shape
        H, hd = self.num_heads, self.head_dim

        # queries, keys, values: (B, T, d_out) -> (B, T, H, hd) -> (B, H, T, hd), with H = num_heads, hd = head_dim
        queries = self.W_query(x).view(batch_size, num_tokens, H, hd).transpose(1, 2)
        keys = self.W_key(x).view(batch_size, num_tokens, H, hd).transpose(1, 2)
        values = self.W_value(x).view(batch_size, num_tokens, H, hd).transpose(1, 2)

        # scores, weights: (B, H, T, T); context: (B, H, T, hd) -> (B, T, H, hd) -> (B, T, d_out) -> out_proj
        attn_scores = queries @ keys.transpose(-2, -1)
        keep = self.mask[:num_tokens, :num_tokens].bool()  # (T, T), broadcast over batch and heads
        masked_scores = attn_scores.masked_fill(~keep, float("-inf"))
        attn_weights = softmax_stable(masked_scores / math.sqrt(hd), dim=-1)
        attn_weights = self.dropout(attn_weights)
        per_head_context = attn_weights @ values                      # (B, H, T, hd)
        merged = per_head_context.transpose(1, 2).contiguous().view(batch_size, num_tokens, H * hd)
        output = self.out_proj(merged)
        return output
