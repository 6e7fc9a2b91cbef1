"""Bug: softmax_stable always subtracts the max of the last dimension, whatever `dim` is, so softmax along another dim can still overflow to inf/NaN.

Misconception: softmax-wrong-dim
Held out: yes
Source: https://github.com/ModelTC/LightLLM/issues/948 (online softmax subtracting a statistic that is not the max of the reduced axis); written from scratch
"""

from __future__ import annotations

import torch


def softmax_naive(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """exp(x) / sum of exp(x) along dim."""
    e = torch.exp(x)
    return e / torch.sum(e, dim=dim, keepdim=True)


def softmax_stable(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Shift by the row max, then normalise along dim."""
    row_max, _ = torch.max(x, dim=-1, keepdim=True)  # max of each row
    e = torch.exp(x - row_max)
    return e / torch.sum(e, dim=dim, keepdim=True)
