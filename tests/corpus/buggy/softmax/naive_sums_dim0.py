"""Bug: softmax_naive sums along dim 0 whatever `dim` says (seed 001's `softmax_naive`).

Misconception: softmax-wrong-dim
"""

import torch


def softmax_naive(x, dim=-1):
    return torch.exp(x) / torch.exp(x).sum(dim=0)


def softmax_stable(x, dim=-1):
    shifted = x - x.amax(dim=dim, keepdim=True)
    e = torch.exp(shifted)
    return e / e.sum(dim=dim, keepdim=True)
