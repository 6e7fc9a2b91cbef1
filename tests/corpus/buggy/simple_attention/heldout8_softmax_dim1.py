"""Bug: attention_weights normalises with softmax over dim=1, which is the key axis for a (T, T) matrix but the QUERY axis for batched (B, T, T) scores, so batched weights and context vectors are wrong while 2-D inputs pass.

Misconception: softmax-wrong-dim
Held out: yes
Source: seed notebook 003_eef2211e07fb1ee1.txt (its softmax demo uses `torch.softmax(scores, dim=1)`); written from scratch
"""

import torch


def attention_scores(inputs: torch.Tensor) -> torch.Tensor:
    """Dot product of every token with every token: (T, d) -> (T, T), (B, T, d) -> (B, T, T)."""
    keys_t = inputs.transpose(-2, -1)
    return torch.matmul(inputs, keys_t)


def attention_weights(scores: torch.Tensor) -> torch.Tensor:
    """Softmax of each row of scores."""
    return torch.softmax(scores, dim=1)


def context_vectors(inputs: torch.Tensor) -> torch.Tensor:
    """Context vector of every token: weights @ inputs."""
    scores = attention_scores(inputs)
    weights = attention_weights(scores)
    return torch.matmul(weights, inputs)
