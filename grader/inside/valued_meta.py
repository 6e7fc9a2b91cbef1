"""The ``meta`` device with values: where a call puts its tensors, judged as on ``meta``, while the
student's code may still read what its tensors hold.

A device test (``on_meta``) runs a student's call with its inputs on ``meta``: a tensor the code
makes without ``device=`` lands on the CPU and meets a meta tensor, which raises, or the result comes
back on the CPU. Meta tensors hold no values, so honest code that reads one (a bounds check with
``int(positions.max())``, ``if mask.any()``, ``.tolist()``) failed there although it runs on any real
device. Under :class:`ValuedMeta` each operation runs twice: on the meta tensors themselves (placement,
shapes, dtypes and every device error are exactly meta's) and on CPU copies of their values, kept
beside them; a read that meta cannot answer (``item()``, ``nonzero``) is answered from the values.
Only values are added: where a tensor is and what fails for being on the wrong device stays meta's.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map
from torch.utils.weak import WeakTensorKeyDictionary

__all__ = ["ValuedMeta"]

CPU = torch.device("cpu")
# torch's words for "meta has no values for this": the reads answered from the kept values instead
_NO_VALUES = (
    "cannot be called on meta tensors",
    "Cannot copy out of meta tensor",
    "data-independent",
    "no fake impl or Meta kernel",
)


class _NoValues(Exception):
    """A meta tensor whose values were never kept (made where this mode could not see)."""


class ValuedMeta(TorchDispatchMode):
    """Run operations on meta tensors and, beside them, on CPU copies of their values."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.values: WeakTensorKeyDictionary = WeakTensorKeyDictionary()

    def to_meta(self, value: object) -> Any:
        """``value`` with every tensor on ``meta`` (its values kept); a module becomes a copy whose
        parameters and registered buffers are there (plain attributes are copied as they are).
        Called inside this mode (``ops.on_meta``'s run): the move itself keeps a tensor's values."""
        if isinstance(value, torch.Tensor):
            return value.detach().to("meta")
        if isinstance(value, nn.Module):
            return self._module_to_meta(value)
        if isinstance(value, (tuple, list)):
            return type(value)(self.to_meta(v) for v in value)
        if isinstance(value, dict):
            return {k: self.to_meta(v) for k, v in value.items()}
        return value

    def _module_to_meta(self, module: nn.Module) -> nn.Module:
        import copy

        twin = copy.deepcopy(module)
        # the values by object: .to() may swap a parameter's data or make a new Parameter
        kept = [(name, t.detach().clone()) for name, t in _tensors(twin)]
        twin.to("meta")
        now = dict(_tensors(twin))
        for name, value in kept:
            if name in now:
                self._keep(now[name], value)
        return twin

    def _keep(self, meta: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        self.values[meta] = value
        return meta

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if not _touches_meta((args, kwargs)):
            return func(*args, **kwargs)  # plain CPU work: once, as it is
        try:
            shell = func(*args, **kwargs)
        except (NotImplementedError, RuntimeError) as exc:
            if not any(words in str(exc) for words in _NO_VALUES):
                raise  # meta's own verdict: a device mismatch, a shape error, ...
            try:
                return self._read(func, args, kwargs)
            except _NoValues:
                raise exc from None
        try:
            value = func(*self._values(args), **self._values(kwargs))
        except _NoValues:
            return shell
        return self._pair(shell, value)

    def _read(self, func: Any, args: Any, kwargs: Any) -> Any:
        """What meta cannot answer, from the values: a Python number, or a tensor on ``meta`` (on
        a real device a read's result stays there), except a copy the code moved to the CPU."""
        value = func(*self._values(args), **self._values(kwargs))
        moved = kwargs.get("device") not in (None, torch.device("meta"))
        given = {id(t) for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)}

        def place(v: Any) -> Any:
            if not isinstance(v, torch.Tensor) or moved or id(v) in given:
                return v
            return self._keep(torch.empty_like(v, device="meta"), v)

        return tree_map(place, value)

    def _values(self, tree: Any) -> Any:
        def value(x: Any) -> Any:
            if isinstance(x, torch.Tensor) and x.is_meta:
                if x not in self.values:
                    raise _NoValues
                return self.values[x]
            return CPU if isinstance(x, torch.device) and x.type == "meta" else x

        return tree_map(value, tree)

    def _pair(self, shell: Any, value: Any) -> Any:
        if isinstance(shell, torch.Tensor):
            if shell.is_meta and isinstance(value, torch.Tensor):
                self._keep(shell, value)
            return shell
        if isinstance(shell, (tuple, list)) and isinstance(value, (tuple, list)):
            return type(shell)(self._pair(s, v) for s, v in zip(shell, value, strict=False))
        return shell


def _touches_meta(tree: Any) -> bool:
    return any(
        (isinstance(x, torch.Tensor) and x.is_meta)
        or (isinstance(x, torch.device) and x.type == "meta")
        for x in tree_flatten(tree)[0]
    )


def _tensors(module: nn.Module) -> list[tuple[str, torch.Tensor]]:
    named = [*module.named_parameters(remove_duplicate=False)]
    return named + [*module.named_buffers(remove_duplicate=False)]
