"""Bug: softmax_stable takes the max along dim but always sums over the last dimension, so softmax along any other dim (e.g. dim=0) does not sum to 1 along dim.

Misconception: softmax-wrong-dim
Held out: yes
Source: pitfall: hard-coded dim=-1 in one of the two reductions; written from scratch
"""

from __future__ import annotations

import torch


def softmax_naive(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """exp(x) / exp(x).sum(dim), as the book first writes it (overflows for large inputs).

    Works for any shape; the result has the shape and dtype of `x`, and sums to 1 along `dim`.
    """
    e = torch.exp(x)
    total = e.sum(dim=dim, keepdim=True)
    return e / total


def softmax_stable(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax along `dim` that never overflows: subtract the max along `dim` before `exp`.

    Must give no NaN or inf for inputs of +-1000 (float32) and for float16 inputs; same shape and
    dtype as `x`.
    """
    x_max = x.max(dim=dim, keepdim=True).values
    e = torch.exp(x - x_max)
    return e / e.sum(dim=-1, keepdim=True)
