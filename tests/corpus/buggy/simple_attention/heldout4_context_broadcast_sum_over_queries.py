"""Bug: context_vectors forms the weighted sum by broadcasting weights[..., :, :, None] * inputs[..., None, :, :] but sums over dim -3 (the queries) instead of dim -2 (the keys), so row j becomes (sum_i weights[i, j]) * x_j.

Misconception: softmax-wrong-dim
Held out: yes
"""

from __future__ import annotations

import torch


def attention_scores(inputs: torch.Tensor) -> torch.Tensor:
    """Dot product of every token with every token.

    inputs: (T, d) or (B, T, d). Returns (T, T) or (B, T, T), same dtype, with
    scores[..., i, j] = inputs[..., i, :] . inputs[..., j, :] (row i = query i, column j = key j).
    """
    # inputs: (..., T, d) -> scores: (..., T, T)
    return inputs @ inputs.transpose(-2, -1)  # (..., T, d) @ (..., d, T) -> (..., T, T)


def attention_weights(scores: torch.Tensor) -> torch.Tensor:
    """Normalise the scores of each query into probabilities: softmax over the keys (the last dim).

    scores: (T, T) or (B, T, T). Returns a tensor of the same shape and dtype whose every row
    (last dimension) is positive and sums to 1.
    """
    return torch.softmax(scores, dim=-1)  # normalise over keys j, separately for each query i


def context_vectors(inputs: torch.Tensor) -> torch.Tensor:
    """The context vector of every token: its attention weights times the inputs.

    inputs: (T, d) or (B, T, d). Compose `attention_scores` and `attention_weights`, then return
    weights @ inputs, of shape (T, d) or (B, T, d): row i is sum_j weights[i, j] * inputs[j].
    """
    weights = attention_weights(attention_scores(inputs))  # (..., T, T)
    return (weights[..., :, :, None] * inputs[..., None, :, :]).sum(dim=-3)  # (..., T, T, d) -> (..., T, d)
