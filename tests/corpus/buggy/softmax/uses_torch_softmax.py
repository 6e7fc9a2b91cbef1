"""Bug: calls the banned torch.softmax instead of writing softmax (banned API).

Misconception: banned-api
"""

import torch


def softmax_naive(x, dim=-1):
    return torch.softmax(x, dim=dim)


def softmax_stable(x, dim=-1):
    return x.softmax(dim)
