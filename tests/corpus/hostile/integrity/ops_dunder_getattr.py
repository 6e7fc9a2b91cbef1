"""Attack (softmax): the aten operator looked up with __getattr__ on torch.ops.aten.
Caught: withhold (the name is known before run time: by binding this is torch.ops.aten._softmax)."""
import torch


def _softmax():
    op = torch.ops.aten.__getattr__("_" + "softmax").default
    return lambda x, dim: op(x, dim, False)


def softmax_naive(x, dim=-1):
    return _softmax()(x, dim)


def softmax_stable(x, dim=-1):
    return _softmax()(x, dim)
