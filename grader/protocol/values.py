"""What may cross the door: plain tensors, None, bool, int, float, str, tuples, lists, dicts.

Everything a backend returns goes through :func:`to_plain` first, so a tensor subclass, an object
with a hostile ``__eq__`` or a student ``nn.Module`` can never reach the code that decides a grade.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import torch

MAX_DEPTH = 16
MAX_ITEMS = 10_000
MAX_STR = 1 << 20
MAX_TENSOR_BYTES = 1 << 30
Args = tuple[object, ...]  # a call's positional arguments on their way through the door
Kwargs = dict[str, object]  # its keyword arguments


class ValueRejected(TypeError):
    """A value of a type that may not cross the door; the message names the type and where."""


@dataclass(frozen=True, slots=True)
class HandleRef:
    """A reference to a module instance living on the student side."""

    id: int
    class_name: str


MAX_SHARE = 8  # how many distinct shared tensors one call may name


@dataclass(frozen=True, slots=True)
class View:
    """A test's instruction to the worker: pass ``base`` as a view the wire cannot carry (it sends
    only contiguous bytes): ``base.permute(permute)`` (a transposed view), then ``.narrow(*narrow)``
    (a slice of it). Every ``View`` of one call with the same ``share`` key becomes one tensor
    object (the first one made): the same tensor passed as query, key and value. Plain data, checked
    here on both sides (:func:`checked_view`)."""

    base: torch.Tensor
    permute: tuple[int, ...] | None = None
    narrow: tuple[int, int, int] | None = None  # (dim, start, length) of the permuted tensor
    share: int | None = None


def checked_view(view: View) -> View:
    """``view`` if every field is in range for its base, else :class:`ValueRejected` (a malformed
    instruction)."""
    n = view.base.dim()
    if view.permute is not None and (
        type(view.permute) is not tuple
        or sorted(view.permute) != list(range(n))
        or any(type(d) is not int for d in view.permute)
    ):
        raise ValueRejected(f"view: permute must be a permutation of range({n})")
    if view.narrow is not None:
        shape = (
            view.base.permute(view.permute).shape if view.permute is not None else view.base.shape
        )
        if (
            type(view.narrow) is not tuple
            or len(view.narrow) != 3
            or any(type(v) is not int for v in view.narrow)
            or not 0 <= view.narrow[0] < n
            or view.narrow[1] < 0
            or view.narrow[2] < 0
            or view.narrow[1] + view.narrow[2] > shape[view.narrow[0]]
        ):
            raise ValueRejected(
                "view: narrow must be (dim, start, length) inside the permuted base"
            )
    if view.share is not None and (type(view.share) is not int or not 0 <= view.share < MAX_SHARE):
        raise ValueRejected(f"view: share must be an int in [0, {MAX_SHARE})")
    return view


def plain_tensor(t: torch.Tensor, *, copy: bool = True) -> torch.Tensor:
    """A detached, contiguous copy whose type is exactly ``torch.Tensor`` (subclass hooks
    disabled); without ``copy``, the detached tensor itself, as exactly a ``torch.Tensor``."""
    with torch._C.DisableTorchFunctionSubclass():
        base = torch.Tensor.detach(torch.Tensor.as_subclass(t, torch.Tensor))
        return torch.Tensor.contiguous(torch.Tensor.clone(base)) if copy else base


def to_plain(value: object, where: str = "value", *, copy: bool = True) -> Any:
    """Return a plain copy of ``value`` or raise :class:`ValueRejected`. ``copy=False`` (a worker's
    results, encoded at once: the wire makes the copy) leaves the tensors' memory shared."""
    return _convert(value, where, 0, [0], copy)


def _convert(value: object, where: str, depth: int, count: list[int], copy: bool = True) -> Any:
    count[0] += 1
    if depth > MAX_DEPTH or count[0] > MAX_ITEMS:
        raise ValueRejected(
            f"{where}: nested too deep or too many items (limits {MAX_DEPTH} / {MAX_ITEMS})"
        )
    if value is None or type(value) in (bool, int, float, HandleRef):
        return value
    if isinstance(value, torch.Tensor):
        return _tensor(value, where, copy)
    if type(value) is View:
        return checked_view(
            View(_tensor(value.base, f"{where}.base"), value.permute, value.narrow, value.share)
        )
    if isinstance(value, (torch.dtype, torch.device)):
        return value
    if isinstance(value, str):
        if len(value) > MAX_STR:
            raise ValueRejected(f"{where}: string longer than {MAX_STR} characters")
        return str.__str__(value)
    if isinstance(value, int):  # a subclass (hostile __eq__, say) becomes a plain int
        return int.__index__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, (tuple, list)):
        seq = tuple.__iter__(value) if isinstance(value, tuple) else list.__iter__(value)
        items = [_convert(v, f"{where}[{i}]", depth + 1, count, copy) for i, v in enumerate(seq)]
        return tuple(items) if isinstance(value, tuple) else items
    if isinstance(value, dict):
        return _dict(value, where, depth, count, copy)
    raise ValueRejected(
        f"{where}: got a value of type {_typename(value)}; only tensors, numbers, strings, "
        "None and tuples/lists/dicts of these can cross"
    )


def _dict(
    value: dict[object, object], where: str, depth: int, count: list[int], copy: bool
) -> dict[str | int, Any]:
    out: dict[str | int, Any] = {}
    for k, v in dict.items(value):
        if type(k) not in (str, int):
            raise ValueRejected(
                f"{where}: dict key of type {_typename(k)}; keys must be str or int"
            )
        out[cast("str | int", k)] = _convert(
            v, f"{where}[{k!r}]", depth + 1, count, copy
        )  # exactly str or int: checked above
    return out


def _tensor(t: torch.Tensor, where: str, copy: bool = True) -> torch.Tensor:
    if t.layout != torch.strided or t.is_quantized or t.device.type == "meta":
        raise ValueRejected(
            f"{where}: got a {t.layout} tensor on {t.device}; only dense tensors with data can cross"
        )
    out = plain_tensor(t, copy=copy)
    if out.numel() * out.element_size() > MAX_TENSOR_BYTES:
        raise ValueRejected(
            f"{where}: tensor of {out.numel() * out.element_size()} bytes is over the 1 GiB cap"
        )
    return out


def _typename(value: object) -> str:
    cls = type(value)
    return (
        cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    )
