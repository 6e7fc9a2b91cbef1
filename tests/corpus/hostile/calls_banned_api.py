"""Shortcut: calls the banned torch.softmax / F.softmax."""
import torch.nn.functional as F


def softmax_naive(x, dim=-1):
    return F.softmax(x, dim=dim)


def softmax_stable(x, dim=-1):
    return x.softmax(dim)
