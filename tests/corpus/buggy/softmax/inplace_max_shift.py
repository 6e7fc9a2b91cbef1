"""Bug: softmax_stable subtracts the max in place (`x -= ...`), changing the caller's scores tensor
(a common "save memory" habit; PyTorch forum threads on in-place ops in softmax code).

Misconception: inplace-input
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
    x -= x.amax(dim=dim, keepdim=True)  # in place: saves memory (and changes the caller's tensor)
    exp = torch.exp(x)
    return exp / exp.sum(dim=dim, keepdim=True)
