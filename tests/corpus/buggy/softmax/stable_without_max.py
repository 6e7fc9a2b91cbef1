"""Bug: the "stable" softmax forgets to subtract the max, so it overflows (misconception #14).

Misconception: softmax-no-max
"""

import torch


def softmax_naive(x, dim=-1):
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


def softmax_stable(x, dim=-1):
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)
