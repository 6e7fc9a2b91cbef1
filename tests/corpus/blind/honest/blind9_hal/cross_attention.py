# Generated from solutions/cross_attention.py by `grader build`. Your task: replace each
# `raise NotImplementedError(...)` with working code. Keep the names and signatures.
"""Exercise `cross_attention`: multi-head attention whose queries and keys come from different sequences.

In an encoder-decoder (or a text model reading an image), the decoder sequence `x` (B, L, d_model)
asks the questions and a second sequence `context` (B, S, d_model) supplies the answers: queries are
projected from `x`, keys and values from `context`. L and S are independent (L = 3, S = 5 is fine),
so the score matrix of every head is (L, S), never (L, L). There is no causal mask: every query may
look at every real context token.

Conventions (the same as `F.scaled_dot_product_attention`):
- `key_padding_mask` is a bool tensor (B, S): True = a real context token (attend to it),
  False = padding (it gets zero attention weight and has no influence on the output).
  Note that `nn.MultiheadAttention`'s `key_padding_mask` uses the OPPOSITE convention (True = ignore).
- Scores are scaled by 1/sqrt(head_dim), with head_dim = d_model // num_heads.
- Dropout acts on the attention weights, and only in training mode.
Do not call F.scaled_dot_product_attention or nn.MultiheadAttention here: they are banned in this exercise.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .softmax import softmax_stable


def _check_floating(tensor: torch.Tensor, name: str, rank: int) -> None:
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    if tensor.dim() != rank:
        raise ValueError(f"{name} must have {rank} dims, got shape {tuple(tensor.shape)}")
    if not torch.is_floating_point(tensor):
        raise TypeError(f"{name} must be a floating point tensor, got dtype {tensor.dtype}")


class CrossAttention(nn.Module):
    """Multi-head cross-attention: queries from `x`, keys and values from `context`.

    Attributes (the names are part of the contract: tests load weights by name):
        W_query, W_key, W_value: nn.Linear(d_model, d_model, bias=qkv_bias)
        out_proj:                nn.Linear(d_model, d_model) (with bias)
        dropout:                 nn.Dropout(dropout), applied to the attention weights
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, qkv_bias: bool = False) -> None:
        super().__init__()
        for name, value in (("d_model", d_model), ("num_heads", num_heads)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, got {type(value).__name__}")
            if value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        assert d_model % num_heads == 0, "d_model must be divisible by num_heads"
        if d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} must be divisible by num_heads={num_heads}")
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)):
            raise TypeError(f"dropout must be a real number, got {type(dropout).__name__}")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        if not isinstance(qkv_bias, bool):
            raise TypeError(f"qkv_bias must be a bool, got {type(qkv_bias).__name__}")

        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.W_query = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.W_key = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.W_value = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.out_proj = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(float(dropout))

    def forward(self, x: torch.Tensor, context: torch.Tensor,
                key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Attend from every position of `x` to the (real) positions of `context`.

        Args:
            x: (B, L, d_model), the sequence the queries come from.
            context: (B, S, d_model), the sequence the keys and values come from (S may differ from L).
            key_padding_mask: None, or a bool tensor (B, S): True = real token, False = padding.
                Every row has at least one True.

        Returns:
            (B, L, d_model): out_proj of the concatenated heads' context vectors.
        """
        _check_floating(x, "x", 3)
        _check_floating(context, "context", 3)
        batch_size, num_queries, x_features = x.shape
        ctx_batch, num_keys, ctx_features = context.shape
        if x_features != self.d_model or ctx_features != self.d_model:
            raise ValueError(f"x and context must have d_model={self.d_model} features, got {x_features} "
                             f"and {ctx_features}")
        if ctx_batch != batch_size:
            raise ValueError(f"x and context must have the same batch size, got {batch_size} and {ctx_batch}")
        if num_queries < 1 or num_keys < 1:
            raise ValueError("x and context must each hold at least one token")
        if key_padding_mask is not None:
            if not isinstance(key_padding_mask, torch.Tensor):
                raise TypeError(f"key_padding_mask must be a torch.Tensor, got {type(key_padding_mask).__name__}")
            if key_padding_mask.dtype != torch.bool:
                raise TypeError(f"key_padding_mask must be boolean (True = real token), got dtype "
                                f"{key_padding_mask.dtype}")
            if tuple(key_padding_mask.shape) != (batch_size, num_keys):
                raise ValueError(f"key_padding_mask must have shape (B, S) = {(batch_size, num_keys)}, got "
                                 f"{tuple(key_padding_mask.shape)}")
            key_padding_mask = key_padding_mask.to(x.device)
            if not bool(torch.all(key_padding_mask.any(dim=-1)).item()):
                raise ValueError("every row of key_padding_mask needs at least one True (a real context token)")

        H, hd = self.num_heads, self.head_dim
        # queries from x: (B, L, d_model) -> (B, L, H, hd) -> (B, H, L, hd); keys, values from context: (B, H, S, hd)
        queries = self.W_query(x).view(batch_size, num_queries, H, hd).transpose(1, 2)
        keys = self.W_key(context).view(batch_size, num_keys, H, hd).transpose(1, 2)
        values = self.W_value(context).view(batch_size, num_keys, H, hd).transpose(1, 2)

        # scores, weights: (B, H, L, S); key_padding_mask: (B, S) -> (B, 1, 1, S); context: (B, H, L, hd) -> (B, L, d_model)
        attn_scores = (queries @ keys.transpose(-2, -1)) / math.sqrt(hd)
        if key_padding_mask is not None:
            keep = key_padding_mask[:, None, None, :]  # (B, 1, 1, S)
            attn_scores = attn_scores.masked_fill(~keep, float("-inf"))
        attn_weights = softmax_stable(attn_scores, dim=-1)
        attn_weights = self.dropout(attn_weights)
        per_head_context = attn_weights @ values  # (B, H, L, hd)
        merged = per_head_context.transpose(1, 2).contiguous().view(batch_size, num_queries, self.d_model)
        return self.out_proj(merged)
