"""Simplified attention by broadcasting (chen)."""

from __future__ import annotations

import torch


def attention_scores(inputs: torch.Tensor) -> torch.Tensor:
    return (inputs.unsqueeze(-2) * inputs.unsqueeze(-3)).sum(-1)


def attention_weights(scores: torch.Tensor) -> torch.Tensor:
    return scores.softmax(-1)


def context_vectors(inputs: torch.Tensor) -> torch.Tensor:
    return attention_weights(attention_scores(inputs)) @ inputs
