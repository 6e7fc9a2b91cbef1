"""Module handles given back to the student's code: arguments that name a handle, and ``invoke``.

A test may pass a handle it holds to another call (``decode(model, cache, x)``): on the wire it is a
:class:`HandleRef`; here it becomes the module it names again. ``invoke`` reaches a public method that
the student's own class defines (``cache.update(k, v)``), never one ``nn.Module`` itself provides.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from torch import nn

from grader.protocol.errors import StudentAPIError
from grader.protocol.values import Args, HandleRef, Kwargs


def resolve(args: Args, kwargs: Kwargs, handles: Mapping[int, tuple[nn.Module, str]]) -> tuple[Args, Kwargs]:
    """``args``/``kwargs`` with every :class:`HandleRef` (at any depth) replaced by the module it names."""
    def swap(value: object) -> object:
        if type(value) is HandleRef:
            if value.id not in handles:
                raise StudentAPIError(f"no module handle {value.id} (released, or the worker restarted)")
            return handles[value.id][0]
        if isinstance(value, (list, tuple)):  # plain data: exactly a list or a tuple here
            return type(value)(swap(v) for v in value)
        if isinstance(value, dict):
            return {k: swap(v) for k, v in value.items()}
        return value
    return tuple(swap(a) for a in args), {k: swap(v) for k, v in kwargs.items()}


def method_of(m: nn.Module, name: str) -> Callable[..., Any]:
    """The bound public method ``name`` defined by a class of the student's (not by ``nn.Module``)."""
    if not name.isidentifier() or name.startswith("_"):
        raise StudentAPIError(f"invoke: {name[:40]!r} is not a public method name")
    for cls in type(m).__mro__:
        if cls is nn.Module:
            break
        if callable(vars(cls).get(name)):
            return getattr(m, name)  # type: ignore[no-any-return]  # a student method: any signature
    raise StudentAPIError(f"{type(m).__name__} defines no method {name!r}: define it in your class")
