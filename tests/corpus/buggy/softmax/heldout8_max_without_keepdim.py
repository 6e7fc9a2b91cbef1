"""Bug: softmax_stable takes the maximum along `dim` without keepdim, so the reduced max broadcasts against the wrong axis: it is right for dim=0 on 2-D inputs, silently wrong for dim=-1 on square inputs and fails on other shapes.

Misconception: softmax-no-keepdim
Held out: yes
Source: classic learner slip (the axis/keepdims broadcasting mistake of the numpy softmax answers); written from scratch
"""

import torch


def softmax_naive(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """exp(x) / sum(exp(x)) along dim."""
    e = x.exp()
    total = e.sum(dim, keepdim=True)
    return e / total


def softmax_stable(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Same as softmax_naive but shifted by the max so exp can't overflow."""
    biggest = torch.max(x, dim=dim).values  # max of every slice
    e = torch.exp(x - biggest)
    return e / e.sum(dim=dim, keepdim=True)
