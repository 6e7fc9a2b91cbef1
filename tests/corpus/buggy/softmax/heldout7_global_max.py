"""Bug: softmax_stable subtracts the maximum of the whole tensor instead of the maximum along `dim`, so a row far below the global max underflows to 0/0 = NaN.

Misconception: softmax-wrong-dim
Held out: yes
Source: https://github.com/robertknight/rten/pull/1321 and https://github.com/tracel-ai/burn/pull/4697 (NaN when a row's max is not the one subtracted / rows underflow); the global-max shift is the classic learner variant; written from the reference
"""

from __future__ import annotations

import torch


def softmax_naive(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """exp(x) / exp(x).sum(dim), as the book first writes it (overflows for large inputs).

    Works for any shape; the result has the shape and dtype of `x`, and sums to 1 along `dim`.
    """
    ### BEGIN SOLUTION
    exp = torch.exp(x)
    return exp / exp.sum(dim=dim, keepdim=True)
    ### END SOLUTION


def softmax_stable(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax along `dim` that never overflows: subtract the max along `dim` before `exp`.

    Must give no NaN or inf for inputs of +-1000 (float32) and for float16 inputs; same shape and
    dtype as `x`.
    """
    ### BEGIN SOLUTION
    shifted = x - x.max()  # largest entry of each slice becomes 0: exp <= 1
    exp = torch.exp(shifted)
    return exp / exp.sum(dim=dim, keepdim=True)
    ### END SOLUTION
