"""Bug: attention_scores uses inputs.T, which reverses all dimensions of a batched (B, T, d) tensor, so batched inputs give a wrong-shaped result or an error.

Misconception: keys-dot-t
Held out: yes
Source: 003_eef2211e07fb1ee1.txt: scores = Q @ K.T; written for 2-D inputs; written from scratch
"""

from __future__ import annotations

import torch


def attention_scores(inputs: torch.Tensor) -> torch.Tensor:
    """Dot product of every token with every token.

    inputs: (T, d) or (B, T, d). Returns (T, T) or (B, T, T), same dtype, with
    scores[..., i, j] = inputs[..., i, :] . inputs[..., j, :] (row i = query i, column j = key j).
    """
    # inputs: (..., T, d) -> scores: (..., T, T)
    return inputs @ inputs.T


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
    attn_scores = attention_scores(inputs)
    attn_weights = attention_weights(attn_scores)
    return torch.matmul(attn_weights, inputs)
