"""Bug: attention_weights divides the scores by their row sum instead of taking the softmax, the book's first simple normalisation, giving negative or non-softmax weights.

Misconception: not-softmax
Held out: yes
Source: https://github.com/rasbt/LLMs-from-scratch ch03 section 3.3.1 (attn_scores / attn_scores.sum() before introducing softmax) and https://github.com/rasbt/LLMs-from-scratch/issues/280; written from scratch
"""

from __future__ import annotations

import torch


def attention_scores(inputs: torch.Tensor) -> torch.Tensor:
    """Dot product of every token with every token."""
    return torch.einsum("...id,...jd->...ij", inputs, inputs)


def attention_weights(scores: torch.Tensor) -> torch.Tensor:
    """Normalise each row so that it sums to 1."""
    return scores / scores.sum(dim=-1, keepdim=True)


def context_vectors(inputs: torch.Tensor) -> torch.Tensor:
    """weights @ inputs."""
    return attention_weights(attention_scores(inputs)) @ inputs
