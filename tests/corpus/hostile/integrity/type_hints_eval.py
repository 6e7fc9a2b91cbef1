"""Attack (softmax): a string annotation evaluated by typing.get_type_hints names the banned softmax.
Caught: review (typing.get_type_hints evaluates strings); the runtime ban refuses the operator."""
import typing

import torch


def _holder(x: "torch.softmax"):
    return x


def _softmax():
    return typing.get_type_hints(_holder, {"torch": torch})["x"]


def softmax_naive(x, dim=-1):
    return _softmax()(x, dim)


def softmax_stable(x, dim=-1):
    return _softmax()(x, dim)
