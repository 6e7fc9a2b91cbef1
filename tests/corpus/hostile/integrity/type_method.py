"""Attack (softmax): the tensor method taken from the tensor's type.
Caught: withhold (Tensor.softmax, banned here, whatever object it is read from)."""
import torch


def _softmax():
    return lambda x, dim: type(x).softmax(x, dim)


def softmax_naive(x, dim=-1):
    return _softmax()(x, dim)


def softmax_stable(x, dim=-1):
    return _softmax()(x, dim)
