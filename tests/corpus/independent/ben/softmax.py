"""Softmax, one step a line (ben)."""

from __future__ import annotations

import torch


def softmax_naive(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    numerator = torch.exp(x)
    denominator = numerator.sum(dim, keepdim=True)
    result = numerator / denominator
    return result


def softmax_stable(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    largest = x.max(dim=dim, keepdim=True).values
    logits = x - largest
    numerator = logits.exp()
    denominator = numerator.sum(dim=dim, keepdim=True)
    return numerator / denominator
