"""Banned APIs: names from the manifest that raise while an exercise's own code runs.

The patches exist only inside a window (an import or a call into the exercise's module). The stubs
stay harmless after the window: a stub captured by ``from torch.nn.functional import ...`` during
an import forwards to the original whenever its name is not banned at that moment.

Two layers, both inside the window: the stubs (a clear message for the direct call), and a torch
function mode that refuses the banned operators (:mod:`grader.inside.banned_ops`) whatever name
reached them: ``torch._C._nn.scaled_dot_product_attention``, ``torch.ops.aten._softmax.default``, a
getattr chain built at run time, an original captured while another exercise's window was open.
Switching the mode off takes torch's private mode stack, which the trusted side's static scan
reports (grader.scoring.integrity): student code shares this process, so this is the first line, not
the enforcement. The cheap tricks fail here too: the active set is a frozenset that is replaced,
never mutated (``_ACTIVE.clear()`` raises), and a stub's closure holds only the API's name, never
the original (``stub.__closure__`` yields no way around the ban).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import types
from collections.abc import Callable, Iterator
from typing import Any

from torch.overrides import TorchFunctionMode

from grader.inside.banned_ops import operators
from grader.protocol.errors import BannedAPIError

_ACTIVE: frozenset[str] = frozenset()


@functools.cache
def _resolve(dotted: str) -> tuple[Any, str, Any]:
    """(owner object, attribute name, original value) for ``torch.x.y.name``."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            owner: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:-1]:
            owner = getattr(owner, attr)
        return owner, parts[-1], getattr(owner, parts[-1])
    raise ValueError(f"cannot resolve banned API {dotted!r}")


def _refuse(dotted: str) -> BannedAPIError:
    return BannedAPIError(
        f"{dotted} is not allowed in this exercise: the point is to write it yourself",
        exc_type="BannedAPIError",
    )


@functools.cache
def _stub(dotted: str) -> Callable[..., Any]:
    def banned(*args: object, **kwargs: object) -> Any:
        if dotted in _ACTIVE:
            raise _refuse(dotted)
        return _resolve(dotted)[2](
            *args, **kwargs
        )  # looked up per call: no cell holds the original

    banned.__name__ = getattr(_resolve(dotted)[2], "__name__", "banned")
    return banned


@contextlib.contextmanager
def banned(names: tuple[str, ...] | list[str], *, install: tuple[str, ...] = ()) -> Iterator[None]:
    """Make every name in ``names`` raise :class:`BannedAPIError` inside the ``with`` block.

    ``install`` names get their (inactive) stubs too, so that a module importing them binds the
    stub: a ban scoped to one function then still applies to a name captured at import time.
    """
    global _ACTIVE
    order = [n for n in dict.fromkeys(names) if n not in _ACTIVE]
    fresh = frozenset(order)
    patched = []
    try:
        for name in dict.fromkeys([*order, *install]):
            owner, attr, original = _resolve(name)
            if getattr(owner, attr) is original:
                setattr(owner, attr, _stub(name))
                patched.append((owner, attr, original))
        _ACTIVE = _ACTIVE | fresh
        with _Refusal(tuple(order)) if order else contextlib.nullcontext():
            yield
    finally:
        for owner, attr, original in reversed(patched):
            setattr(owner, attr, original)
        _ACTIVE = _ACTIVE - fresh


_NAMED_BY_OPERATOR = (
    types.BuiltinFunctionType,
    types.MethodDescriptorType,
    types.WrapperDescriptorType,
)


def _operator(func: object) -> str:
    """The operator a torch callable runs: an ``OpOverload``'s or ``OpOverloadPacket``'s schema
    name, a C function's own name; '' for a Python function (those are refused by identity)."""
    schema = getattr(func, "_schema", None)
    if schema is not None:
        return str(getattr(schema, "name", "")).rsplit("::", 1)[-1]
    packet = getattr(func, "_qualified_op_name", None)
    if isinstance(packet, str):
        return packet.rsplit("::", 1)[-1]
    return str(getattr(func, "__name__", "")) if isinstance(func, _NAMED_BY_OPERATOR) else ""


class _Refusal(TorchFunctionMode):
    """Refuses every torch call that runs one of the banned APIs' operators, or a banned Python
    original."""

    def __init__(self, names: tuple[str, ...]) -> None:
        super().__init__()
        self.by_operator: dict[str, str] = {}
        for name in names:  # the first banned name of an operator is the one the message shows
            for op in operators(name):
                self.by_operator.setdefault(op, name)
        # ids of the originals, which _resolve's cache keeps alive: no other object can take their
        # ids meanwhile (a cache of verdicts by id could: a property getter made and freed per
        # access, then an operator made lazily at the same address; so each call is judged afresh,
        # about a microsecond)
        self.by_identity = {id(_resolve(name)[2]): name for name in names}

    def __torch_function__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        banned = self.by_identity.get(id(func)) or self.by_operator.get(_operator(func))
        if banned:
            raise _refuse(banned)
        return func(*args, **(kwargs or {}))
