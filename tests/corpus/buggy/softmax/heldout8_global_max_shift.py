"""Bug: softmax_stable subtracts the maximum of the whole tensor instead of the maximum along `dim`, so a slice that lies far below the global maximum underflows to 0/0 and returns NaN.

Misconception: softmax-wrong-dim
Held out: yes
Source: https://stackoverflow.com/questions/34968722/how-to-implement-the-softmax-function-in-python (the widely copied `np.exp(x - np.max(x))` that takes the max over the whole array); from the reference
"""

from __future__ import annotations

import torch


def softmax_naive(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """exp(x) / exp(x).sum(dim), as the book first writes it (overflows for large inputs).

    Works for any shape; the result has the shape and dtype of `x`, and sums to 1 along `dim`.
    """
    exp = torch.exp(x)
    return exp / exp.sum(dim=dim, keepdim=True)


def softmax_stable(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax along `dim` that never overflows: subtract the max along `dim` before `exp`.

    Must give no NaN or inf for inputs of +-1000 (float32) and for float16 inputs; same shape and
    dtype as `x`.
    """
    shifted = x - x.max()  # subtract the max so exp never overflows
    exp = torch.exp(shifted)
    return exp / exp.sum(dim=dim, keepdim=True)
