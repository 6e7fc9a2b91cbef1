"""Softmax through the log-sum-exp (chen)."""

from __future__ import annotations

import torch


def softmax_naive(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    return x.exp() / x.exp().sum(dim=dim).unsqueeze(dim)


def softmax_stable(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    return torch.exp(x - torch.logsumexp(x, dim=dim, keepdim=True))
