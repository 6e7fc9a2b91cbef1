# Generated from solutions/simple_attention.py by `grader build`. Your task: replace each
# `raise NotImplementedError(...)` with working code. Keep the names and signatures.
"""Exercise `simple_attention`: self-attention without trainable weights (seed 001, "Your journey starts with one step").

Every token is its own query, key and value. For inputs x of shape (T, d):

    scores  = x @ x^T                  (T, T)   scores[i, j] = <x_i, x_j>
    weights = softmax(scores, dim=-1)  (T, T)   row i: how much query i looks at each key j; sums to 1
    context = weights @ x              (T, d)   row i: the weighted average of all inputs for query i

Batched inputs (B, T, d) work the same way, one (T, T) matrix per batch item: transpose the last two
dimensions only (`x.T` reverses *all* dimensions of a 3-D tensor) and take the softmax over the last
dimension, the keys. torch.softmax is allowed here; F.scaled_dot_product_attention is not.
"""

from __future__ import annotations

import torch

from .softmax import softmax_stable


def _check_tokens(tensor: torch.Tensor, name: str) -> None:
    """A floating point tensor of rank 2 (T, d) or 3 (B, T, d)."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    if tensor.dim() not in (2, 3):
        raise ValueError(f"{name} must have shape (T, d) or (B, T, d), got {tuple(tensor.shape)}")
    if not torch.is_floating_point(tensor):
        raise TypeError(f"{name} must be a floating point tensor, got dtype {tensor.dtype}")


def attention_scores(inputs: torch.Tensor) -> torch.Tensor:
    """Dot product of every token with every token.

    inputs: (T, d) or (B, T, d). Returns (T, T) or (B, T, T), same dtype, with
    scores[..., i, j] = inputs[..., i, :] . inputs[..., j, :] (row i = query i, column j = key j).
    """
    _check_tokens(inputs, "inputs")
    # inputs: (..., T, d) -> scores: (..., T, T)
    keys_transposed = inputs.transpose(-2, -1)  # (..., d, T): only the last two dims swap
    scores = inputs @ keys_transposed
    return scores


def attention_weights(scores: torch.Tensor) -> torch.Tensor:
    """Normalise the scores of each query into probabilities: softmax over the keys (the last dim).

    scores: (T, T) or (B, T, T). Returns a tensor of the same shape and dtype whose every row
    (last dimension) is positive and sums to 1.
    """
    _check_tokens(scores, "scores")
    weights = softmax_stable(scores, dim=-1)  # my own stable softmax, over the keys
    return weights


def context_vectors(inputs: torch.Tensor) -> torch.Tensor:
    """The context vector of every token: its attention weights times the inputs.

    inputs: (T, d) or (B, T, d). Compose `attention_scores` and `attention_weights`, then return
    weights @ inputs, of shape (T, d) or (B, T, d): row i is sum_j weights[i, j] * inputs[j].
    """
    _check_tokens(inputs, "inputs")
    scores = attention_scores(inputs)        # (..., T, T)
    weights = attention_weights(scores)      # (..., T, T), rows sum to 1
    context = weights @ inputs               # (..., T, d)
    return context
