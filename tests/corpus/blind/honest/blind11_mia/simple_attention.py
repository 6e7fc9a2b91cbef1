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


def attention_scores(inputs: torch.Tensor) -> torch.Tensor:
    """Dot product of every token with every token.

    inputs: (T, d) or (B, T, d). Returns (T, T) or (B, T, T), same dtype, with
    scores[..., i, j] = inputs[..., i, :] . inputs[..., j, :] (row i = query i, column j = key j).
    """
    # inputs: (..., T, d) -> scores: (..., T, T)
    # swap only the last two axes (like np.swapaxes(x, -2, -1)), so batches stay batches
    return torch.matmul(inputs, inputs.transpose(-2, -1))


def attention_weights(scores: torch.Tensor) -> torch.Tensor:
    """Normalise the scores of each query into probabilities: softmax over the keys (the last dim).

    scores: (T, T) or (B, T, T). Returns a tensor of the same shape and dtype whose every row
    (last dimension) is positive and sums to 1.
    """
    return torch.softmax(scores, dim=-1)


def context_vectors(inputs: torch.Tensor) -> torch.Tensor:
    """The context vector of every token: its attention weights times the inputs.

    inputs: (T, d) or (B, T, d). Compose `attention_scores` and `attention_weights`, then return
    weights @ inputs, of shape (T, d) or (B, T, d): row i is sum_j weights[i, j] * inputs[j].
    """
    weights = attention_weights(attention_scores(inputs))
    return torch.matmul(weights, inputs)
