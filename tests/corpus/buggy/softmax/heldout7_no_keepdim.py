"""Bug: Both softmaxes divide by exp(x).sum(dim) without keepdim=True, so the totals broadcast against the wrong axis (wrong values on square inputs, errors or garbage otherwise).

Misconception: softmax-no-keepdim
Held out: yes
Source: https://github.com/jadore801120/attention-is-all-you-need-pytorch/issues/52 (softmax normalised along the wrong axis); the missing keepdim broadcast is the hand-written variant; written from scratch
"""

from __future__ import annotations

import torch


def softmax_naive(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """exp(x) / sum of exp(x) along dim."""
    e = x.exp()
    total = e.sum(dim)  # one total per slice
    return e / total


def softmax_stable(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Shift by the max along dim, then normalise."""
    biggest = x.max(dim=dim).values
    e = (x - biggest).exp()
    return e / e.sum(dim)
