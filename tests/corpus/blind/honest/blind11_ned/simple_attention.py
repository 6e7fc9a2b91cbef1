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
import torch.nn.functional as F
from torch import nn


class DotProductScores(nn.Module):
    """Every token against every token: inputs @ inputs^T over the last two dims, (..., T, d) -> (..., T, T)."""

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return inputs @ inputs.transpose(-2, -1)


class KeySoftmax(nn.Module):
    """Softmax over the keys (the last dim) of a (..., T, T) score matrix."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim: int = dim

    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        return F.softmax(scores, dim=self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class WeightedSum(nn.Module):
    """Mix the inputs with the attention weights: (..., T, T) @ (..., T, d) -> (..., T, d)."""

    def forward(self, weights: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        return weights @ inputs


def attention_scores(inputs: torch.Tensor) -> torch.Tensor:
    """Dot product of every token with every token.

    inputs: (T, d) or (B, T, d). Returns (T, T) or (B, T, T), same dtype, with
    scores[..., i, j] = inputs[..., i, :] . inputs[..., j, :] (row i = query i, column j = key j).
    """
    # inputs: (..., T, d) -> scores: (..., T, T)
    return DotProductScores()(inputs)


def attention_weights(scores: torch.Tensor) -> torch.Tensor:
    """Normalise the scores of each query into probabilities: softmax over the keys (the last dim).

    scores: (T, T) or (B, T, T). Returns a tensor of the same shape and dtype whose every row
    (last dimension) is positive and sums to 1.
    """
    return KeySoftmax(dim=-1)(scores)


def context_vectors(inputs: torch.Tensor) -> torch.Tensor:
    """The context vector of every token: its attention weights times the inputs.

    inputs: (T, d) or (B, T, d). Compose `attention_scores` and `attention_weights`, then return
    weights @ inputs, of shape (T, d) or (B, T, d): row i is sum_j weights[i, j] * inputs[j].
    """
    weights = attention_weights(attention_scores(inputs))
    return WeightedSum()(weights, inputs)
