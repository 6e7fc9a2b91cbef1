# Generated from solutions/causal_attention.py by `grader build`. Your task: replace each
# `raise NotImplementedError(...)` with working code. Keep the names and signatures.
"""Exercise `causal_attention`: single-head self-attention that cannot look into the future, with dropout.

A GPT-style decoder predicts token t+1 from tokens 0..t only, so query t may attend to keys 0..t and
never to keys t+1.. ("causal" or "masked" attention). The recipe, for x of shape (B, T, d_in):

    queries, keys, values = W_query(x), W_key(x), W_value(x)          # each (B, T, d_out)
    scores  = queries @ keys^T                                          # (B, T, T)
    scores[:, i, j] = -inf wherever j > i                              # the causal mask
    weights = softmax(scores / sqrt(d_out), dim=-1)                     # rows sum to 1
    weights = dropout(weights)                                          # training mode only
    context = weights @ values                                          # (B, T, d_out)

Conventions used across the pack:
- a boolean mask follows F.scaled_dot_product_attention: True = this query may attend to this key;
- the mask for the longest allowed input (context_length x context_length) is built once in
  `__init__` and stored with `register_buffer("mask", ...)`, so it moves with `.to(device)` and is
  saved in `state_dict()`. Its contents (bool or float, tril or triu) are up to you;
- inputs may be shorter than context_length: use the top-left (T, T) corner of the mask;
- dropout acts on the attention WEIGHTS (after softmax), and nn.Dropout is only active in `.train()`.
Do not call F.scaled_dot_product_attention or nn.MultiheadAttention here: they are banned in this exercise.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .masks import causal_mask
from .softmax import softmax_stable


def _check_positive_int(value: int, name: str) -> int:
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


class CausalAttention(nn.Module):
    """Single-head causal self-attention with dropout on the attention weights.

    Args:
        d_in: size of each input vector.
        d_out: size of each query/key/value vector, and of each output vector.
        context_length: the longest sequence the module accepts (size of the `mask` buffer).
        dropout: probability of zeroing an attention weight during training.
        qkv_bias: whether the three projections have a bias.

    Attributes the grader relies on (names matter, they appear in `state_dict()`):
        W_query, W_key, W_value: nn.Linear(d_in, d_out, bias=qkv_bias).
        dropout: nn.Dropout(dropout), applied to the attention weights.
        mask: a buffer registered with `register_buffer`, (context_length, context_length).
    """

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float,
                 qkv_bias: bool = False) -> None:
        super().__init__()
        self.d_in = _check_positive_int(d_in, "d_in")
        self.d_out = _check_positive_int(d_out, "d_out")
        self.context_length = _check_positive_int(context_length, "context_length")
        dropout = _check_dropout(dropout)
        if not isinstance(qkv_bias, bool):
            raise TypeError(f"qkv_bias must be a bool, got {type(qkv_bias).__name__}")
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        # my mask is a keep-mask (True = may attend, j <= i), built once for the longest input
        self.register_buffer("mask", causal_mask(context_length))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Causal self-attention over `x`.

        Args:
            x: (B, T, d_in) with 1 <= T <= context_length.

        Returns:
            The context vectors, (B, T, d_out): row t is a weighted average of the value vectors of
            positions 0..t, with weights softmax(q_t . k_j / sqrt(d_out)) over j <= t (dropout on the
            weights in training mode only).
        """
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
        if x.dim() != 3:
            raise ValueError(f"x must have shape (B, T, d_in), got {tuple(x.shape)}")
        if not torch.is_floating_point(x):
            raise TypeError(f"x must be a floating point tensor, got dtype {x.dtype}")
        batch_size, num_tokens, in_features = x.shape
        if in_features != self.W_query.in_features:
            raise ValueError(f"x has {in_features} features, expected d_in={self.W_query.in_features}")
        max_tokens = int(self.mask.shape[0])
        if not 1 <= num_tokens <= max_tokens:
            raise ValueError(f"sequence length T={num_tokens} must be in [1, context_length={max_tokens}]")

        # x: (B, T, d_in) -> queries, keys, values: (B, T, d_out); scores, weights: (B, T, T); context: (B, T, d_out)
        queries = self.W_query(x)
        keys = self.W_key(x)
        values = self.W_value(x)
        attn_scores = queries @ keys.transpose(1, 2)
        keep = self.mask[:num_tokens, :num_tokens].bool()  # top-left corner, (T, T)
        masked_scores = attn_scores.masked_fill(~keep, float("-inf"))  # not in place: keeps autograd happy
        head_dim = keys.shape[-1]
        attn_weights = softmax_stable(masked_scores / math.sqrt(head_dim), dim=-1)
        attn_weights = self.dropout(attn_weights)  # identity in eval mode
        context_vecs = attn_weights @ values
        return context_vecs
