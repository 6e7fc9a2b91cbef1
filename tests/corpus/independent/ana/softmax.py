"""Softmax, written with torch functions (ana)."""

from __future__ import annotations

import torch


def softmax_naive(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    e = x.exp()
    return torch.div(e, torch.sum(e, dim, keepdim=True))


def softmax_stable(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    top, _ = torch.max(x, dim=dim, keepdim=True)
    return softmax_naive(x - top, dim)
