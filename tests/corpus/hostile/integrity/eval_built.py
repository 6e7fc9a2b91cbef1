"""Attack (softmax): eval of a name assembled from pieces.
Caught: review (eval); the runtime ban refuses the operator."""
import torch


def _softmax():
    return eval("torch." + "soft" + "max", {"torch": torch})


def softmax_naive(x, dim=-1):
    return _softmax()(x, dim)


def softmax_stable(x, dim=-1):
    return _softmax()(x, dim)
