"""Bug: attention_scores uses inputs.T, which reverses all dimensions of a batched (B, T, d) tensor, so batched inputs fail or give wrong scores.

Misconception: keys-dot-t
Held out: yes
Source: https://github.com/rasbt/LLMs-from-scratch ch03 (inputs @ inputs.T in the unbatched example) and https://github.com/rish-16/tokenlearner-pytorch/issues/1 (wrong axis swap for batched tensors); written from scratch
"""

from __future__ import annotations

import torch


def attention_scores(inputs: torch.Tensor) -> torch.Tensor:
    """Dot product of every token with every token."""
    return torch.matmul(inputs, inputs.T)


def attention_weights(scores: torch.Tensor) -> torch.Tensor:
    """Softmax over the keys."""
    return torch.softmax(scores, dim=-1)


def context_vectors(inputs: torch.Tensor) -> torch.Tensor:
    """weights @ inputs."""
    weights = attention_weights(attention_scores(inputs))
    return torch.matmul(weights, inputs)
