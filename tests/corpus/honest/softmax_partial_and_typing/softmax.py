"""Honest (functools.partial, typing, a Final constant and a Protocol)."""
from __future__ import annotations

import functools
from typing import Callable, Final, Protocol

import torch

KEEP: Final = True


class Reducer(Protocol):
    def __call__(self, x: torch.Tensor, dim: int) -> torch.Tensor: ...


def _reduce(op: Callable[..., torch.Tensor], x: torch.Tensor, dim: int) -> torch.Tensor:
    return op(x, dim=dim, keepdim=KEEP)


_total: Reducer = functools.partial(_reduce, torch.sum)
_peak: Reducer = functools.partial(_reduce, torch.amax)


def softmax_naive(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    e = torch.exp(x)
    return e / _total(e, dim)


def softmax_stable(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    e = torch.exp(x - _peak(x, dim))
    return e / _total(e, dim)
