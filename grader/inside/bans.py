"""Banned APIs: names from the manifest that raise while an exercise's own code runs.

The patches exist only inside a window (an import or a call into the exercise's module). The stubs
stay harmless after the window: a stub captured by ``from torch.nn.functional import ...`` during
an import forwards to the original whenever its name is not banned at that moment.

Defence in depth only: the enforcement is the trusted side's static scan (grader.scoring.integrity),
because student code shares this process. Still, the cheap tricks fail here too: the active set is a
frozenset that is replaced, never mutated (``_ACTIVE.clear()`` raises), and a stub's closure holds
only the API's name, never the original (``stub.__closure__`` yields no way around the ban).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
from collections.abc import Callable, Iterator
from typing import Any

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


@functools.cache
def _stub(dotted: str) -> Callable[..., Any]:
    def banned(*args: object, **kwargs: object) -> Any:
        if dotted in _ACTIVE:
            raise BannedAPIError(
                f"{dotted} is not allowed in this exercise: the point is to write it yourself",
                exc_type="BannedAPIError",
            )
        return _resolve(dotted)[2](*args, **kwargs)  # looked up per call: no cell holds the original

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
        yield
    finally:
        for owner, attr, original in reversed(patched):
            setattr(owner, attr, original)
        _ACTIVE = _ACTIVE - fresh
