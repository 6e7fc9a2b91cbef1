"""Bug: attention_weights normalises the scores by their row sum instead of a softmax, so weights can be negative and differ from softmax probabilities.

Misconception: not-softmax
Held out: yes
Source: 001_6d8b84533e267197.txt: the chapter first normalises attn_scores by their sum before introducing softmax; written from scratch
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
    return scores / scores.sum(dim=-1, keepdim=True)


def context_vectors(inputs: torch.Tensor) -> torch.Tensor:
    """The context vector of every token: its attention weights times the inputs.

    inputs: (T, d) or (B, T, d). Compose `attention_scores` and `attention_weights`, then return
    weights @ inputs, of shape (T, d) or (B, T, d): row i is sum_j weights[i, j] * inputs[j].
    """
    attn_scores = attention_scores(inputs)
    attn_weights = attention_weights(attn_scores)
    return torch.matmul(attn_weights, inputs)
