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


class CrossAttention(nn.Module):
    """Multi-head cross-attention: queries from `x`, keys and values from `context`.

    Attributes (the names are part of the contract: tests load weights by name):
        W_query, W_key, W_value: nn.Linear(d_model, d_model, bias=qkv_bias)
        out_proj:                nn.Linear(d_model, d_model) (with bias)
        dropout:                 nn.Dropout(dropout), applied to the attention weights
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, qkv_bias: bool = False) -> None:
        super().__init__()
        assert d_model % num_heads == 0, "d_model must be divisible by num_heads"
        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        # queries come from x, keys and values from the context
        self.W_query = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.W_key = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.W_value = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.out_proj = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

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
        # queries from x: (B, L, d_model) -> (B, L, H, hd) -> (B, H, L, hd); keys, values from context: (B, H, S, hd)
        # scores, weights: (B, H, L, S); key_padding_mask: (B, S) -> (B, 1, 1, S); context: (B, H, L, hd) -> (B, L, d_model)
        batch_size, num_queries, x_features = x.shape
        context_batch_size, num_keys, context_features = context.shape
        assert x_features == self.d_model and context_features == self.d_model, "last dims must be d_model"
        assert context_batch_size == batch_size, "x and context must have the same batch size"
        H = self.num_heads
        hd = self.head_dim

        # step 1: project (queries from x, keys and values from the context)
        queries = self.W_query(x)        # (B, L, d_model)
        keys = self.W_key(context)       # (B, S, d_model)
        values = self.W_value(context)   # (B, S, d_model)

        # step 2: split into heads -> (B, H, L, hd) and (B, H, S, hd)
        queries = queries.view(batch_size, num_queries, H, hd).transpose(1, 2)
        keys = keys.view(batch_size, num_keys, H, hd).transpose(1, 2)
        values = values.view(batch_size, num_keys, H, hd).transpose(1, 2)

        # step 3: scaled scores, (B, H, L, S)
        scores = queries @ keys.transpose(-2, -1)
        scaled_scores = scores / math.sqrt(hd)
        assert scaled_scores.shape == (batch_size, H, num_queries, num_keys)

        # step 4: padding keys (False in key_padding_mask) get -inf
        if key_padding_mask is not None:
            assert key_padding_mask.dtype == torch.bool, "key_padding_mask must be bool (True = real token)"
            assert key_padding_mask.dim() == 2 and key_padding_mask.shape[-1] == num_keys, "key_padding_mask: (B, S)"
            keep_mask = key_padding_mask[:, None, None, :]   # (B, 1, 1, S): same for every head and query
            scaled_scores = scaled_scores.masked_fill(~keep_mask, float("-inf"))

        # step 5: softmax over the keys
        weights = torch.softmax(scaled_scores, dim=-1)
        if key_padding_mask is not None:
            # padded keys already have weight 0; this also turns a (not expected) all-padding row into zeros
            weights = weights.masked_fill(~keep_mask, 0.0)
        weights = self.dropout(weights)

        # step 6: per-head context, (B, H, L, hd) -> (B, L, H, hd) -> (B, L, d_model)
        per_head_context = weights @ values
        merged = per_head_context.transpose(1, 2).contiguous().view(batch_size, num_queries, self.d_model)

        # step 7: output projection
        output = self.out_proj(merged)
        assert output.shape == (batch_size, num_queries, self.d_model)
        return output
