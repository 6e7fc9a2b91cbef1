"""Module handles given back to the student's code: arguments that name a handle, and ``invoke``.

A test may pass a handle it holds to another call (``decode(model, cache, x)``): on the wire it is a
:class:`HandleRef`; here it becomes the module it names again. ``invoke`` reaches a public method
that the student's own class defines (``cache.update(k, v)``), never one ``nn.Module`` itself
provides.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from grader.protocol.errors import StudentAPIError
from grader.protocol.values import Args, HandleRef, Kwargs, View


def resolve(
    args: Args, kwargs: Kwargs, handles: Mapping[int, tuple[nn.Module, str]]
) -> tuple[Args, Kwargs]:
    """``args``/``kwargs`` with every :class:`HandleRef` (at any depth) replaced by the module it
    names, and every :class:`View` by the view it asks for (one object per ``share`` key)."""
    shared: dict[int, torch.Tensor] = {}

    def swap(value: object) -> object:
        if type(value) is View:
            return _view(value, shared)
        if type(value) is HandleRef:
            if value.id not in handles:
                raise StudentAPIError(
                    f"no module handle {value.id} (released, or the worker restarted)"
                )
            return handles[value.id][0]
        if isinstance(value, (list, tuple)):  # plain data: exactly a list or a tuple here
            return type(value)(swap(v) for v in value)
        if isinstance(value, dict):
            return {k: swap(v) for k, v in value.items()}
        return value

    return tuple(swap(a) for a in args), {k: swap(v) for k, v in kwargs.items()}


def _view(view: View, shared: dict[int, torch.Tensor]) -> torch.Tensor:
    """The tensor a :class:`View` asks for (its fields were checked when it was decoded)."""
    if view.share is not None and view.share in shared:
        return shared[view.share]
    made = view.base if view.permute is None else view.base.permute(view.permute)
    made = made if view.narrow is None else made.narrow(*view.narrow)
    if view.share is not None:
        shared[view.share] = made
    return made


def method_of(m: nn.Module, name: str) -> Callable[..., Any]:
    """The bound public method ``name`` defined by a class of the student's (not by
    ``nn.Module``)."""
    if not name.isidentifier() or name.startswith("_"):
        raise StudentAPIError(f"invoke: {name[:40]!r} is not a public method name")
    for cls in type(m).__mro__:
        if cls is nn.Module:
            break
        if callable(vars(cls).get(name)):
            return getattr(m, name)  # type: ignore[no-any-return]  # a student method: any signature
    raise StudentAPIError(f"{type(m).__name__} defines no method {name!r}: define it in your class")
