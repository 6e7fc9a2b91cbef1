"""Honest (aliased imports: `import torch as T`, `from torch import exp as e`, a local `sum` shadowing)."""
import torch as T
from torch import exp as e


def softmax_naive(x, dim=-1):
    numerator = e(x)
    sum = numerator.sum(dim, keepdim=True)  # noqa: A001 - a local named like a builtin
    return numerator / sum


def softmax_stable(x, dim=-1):
    numerator = e(x - T.amax(x, dim, keepdim=True))
    return T.div(numerator, T.sum(numerator, dim, keepdim=True))
