"""Bug: attention_weights takes the softmax over dim=1, which is the keys for a (T, T) matrix but the queries for a batched (B, T, T) one, so batched weights are normalised over the wrong axis.

Misconception: dims-from-front
Held out: yes
Source: 003_eef2211e07fb1ee1.txt: softmax(scores, dim=1) in the plotting cell; pitfall: positive dim index breaks with a batch dim; written from scratch
"""

from __future__ import annotations

import torch


def attention_scores(inputs: torch.Tensor) -> torch.Tensor:
    """Dot product of every token with every token.

    inputs: (T, d) or (B, T, d). Returns (T, T) or (B, T, T), same dtype, with
    scores[..., i, j] = inputs[..., i, :] . inputs[..., j, :] (row i = query i, column j = key j).
    """
    # inputs: (..., T, d) -> scores: (..., T, T)
    return torch.matmul(inputs, inputs.transpose(-1, -2))


def attention_weights(scores: torch.Tensor) -> torch.Tensor:
    """Normalise the scores of each query into probabilities: softmax over the keys (the last dim).

    scores: (T, T) or (B, T, T). Returns a tensor of the same shape and dtype whose every row
    (last dimension) is positive and sums to 1.
    """
    return torch.softmax(scores, dim=1)


def context_vectors(inputs: torch.Tensor) -> torch.Tensor:
    """The context vector of every token: its attention weights times the inputs.

    inputs: (T, d) or (B, T, d). Compose `attention_scores` and `attention_weights`, then return
    weights @ inputs, of shape (T, d) or (B, T, d): row i is sum_j weights[i, j] * inputs[j].
    """
    attn_scores = attention_scores(inputs)
    attn_weights = attention_weights(attn_scores)
    return torch.matmul(attn_weights, inputs)
