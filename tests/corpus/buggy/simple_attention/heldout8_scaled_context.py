"""Bug: context_vectors divides the scores by sqrt(d) before the softmax (the scaling of the next lesson), so its weights and context vectors differ from the unscaled self-attention the exercise defines whenever d > 1.

Misconception: wrong-scale
Held out: yes
Source: seed notebook 003_eef2211e07fb1ee1.txt (its 'Scaled Scores' step `scores / math.sqrt(embedding_dim)` carried into the weight-free attention); from the reference
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
    scores = attention_scores(inputs) / inputs.shape[-1] ** 0.5  # scale like in the paper
    weights = attention_weights(scores)  # (..., T, T)
    return weights @ inputs  # (..., T, T) @ (..., T, d) -> (..., T, d)
