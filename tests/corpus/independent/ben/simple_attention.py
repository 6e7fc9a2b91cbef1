"""Simplified attention, step by step (ben)."""

from __future__ import annotations

import torch


def attention_scores(inputs: torch.Tensor) -> torch.Tensor:
    keys_t = inputs.transpose(-1, -2)
    result = torch.matmul(inputs, keys_t)
    return result


def attention_weights(scores: torch.Tensor) -> torch.Tensor:
    row_max = scores.max(dim=-1, keepdim=True).values
    numerator = torch.exp(scores - row_max)
    result = numerator / numerator.sum(dim=-1, keepdim=True)
    return result


def context_vectors(inputs: torch.Tensor) -> torch.Tensor:
    scores = attention_scores(inputs)
    weights = attention_weights(scores)
    result = torch.matmul(weights, inputs)
    return result
