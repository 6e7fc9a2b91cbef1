"""Bug: attention_weights normalises over dim 0 (the queries, or the batch for 3-D input) instead of over the keys, so rows do not sum to 1.

Misconception: softmax-wrong-dim
Held out: yes
Source: https://github.com/jadore801120/attention-is-all-you-need-pytorch/issues/52 (softmax taken over dim 0 instead of the last dim); written from the reference
"""

from __future__ import annotations

import torch


def attention_scores(inputs: torch.Tensor) -> torch.Tensor:
    """Dot product of every token with every token.

    inputs: (T, d) or (B, T, d). Returns (T, T) or (B, T, T), same dtype, with
    scores[..., i, j] = inputs[..., i, :] . inputs[..., j, :] (row i = query i, column j = key j).
    """
    # inputs: (..., T, d) -> scores: (..., T, T)
    ### BEGIN SOLUTION
    return inputs @ inputs.transpose(-2, -1)  # (..., T, d) @ (..., d, T) -> (..., T, T)
    ### END SOLUTION


def attention_weights(scores: torch.Tensor) -> torch.Tensor:
    """Normalise the scores of each query into probabilities: softmax over the keys (the last dim).

    scores: (T, T) or (B, T, T). Returns a tensor of the same shape and dtype whose every row
    (last dimension) is positive and sums to 1.
    """
    ### BEGIN SOLUTION
    return torch.softmax(scores, dim=0)  # normalise over keys j, separately for each query i
    ### END SOLUTION


def context_vectors(inputs: torch.Tensor) -> torch.Tensor:
    """The context vector of every token: its attention weights times the inputs.

    inputs: (T, d) or (B, T, d). Compose `attention_scores` and `attention_weights`, then return
    weights @ inputs, of shape (T, d) or (B, T, d): row i is sum_j weights[i, j] * inputs[j].
    """
    ### BEGIN SOLUTION
    weights = attention_weights(attention_scores(inputs))  # (..., T, T)
    return weights @ inputs  # (..., T, T) @ (..., T, d) -> (..., T, d)
    ### END SOLUTION
