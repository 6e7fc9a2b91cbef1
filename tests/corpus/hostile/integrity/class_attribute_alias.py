"""Attack (softmax): the banned softmax kept as a class attribute and called from there.
Caught: withhold (by binding, the class attribute is torch.softmax)."""
import torch


class _Kit:
    fn = torch.softmax


def _softmax():
    return _Kit.fn


def softmax_naive(x, dim=-1):
    return _softmax()(x, dim)


def softmax_stable(x, dim=-1):
    return _softmax()(x, dim)
