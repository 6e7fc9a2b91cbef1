"""The ``student`` object tests use: ``student.<module>.<name>(...)`` and module handles.

Its whole surface is below. Anything else (attribute poking, ``.weight.data``, passing a lambda)
raises :class:`StudentAPIError`, so a test written against it runs unchanged in-process and against
a sandboxed worker.
"""

from __future__ import annotations

from typing import Any, Protocol, cast

import torch

from grader.inside.standins import ISOLATED_SUFFIX
from grader.protocol.errors import StudentAPIError
from grader.protocol.values import Args, HandleRef, Kwargs, ValueRejected, to_plain


class Backend(Protocol):
    def call(self, module: str, name: str, args: Args, kwargs: Kwargs) -> Any: ...
    def method(self, handle: int, method: str, args: Args, kwargs: Kwargs) -> Any: ...
    def measure(
        self, module: str, name: str, args: Args, kwargs: Kwargs, grad_output: object = None
    ) -> tuple[Any, dict[str, float]]: ...
    def grads(
        self, module: str, name: str, args: Args, kwargs: Kwargs, grad_output: object
    ) -> tuple[Any, tuple[Any, ...]]: ...
    def meta(self, module: str, name: str, args: Args, kwargs: Kwargs) -> Any: ...
    def release(self, handle: int) -> None: ...


def _outgoing(args: Args, kwargs: Kwargs) -> tuple[Args, Kwargs]:
    try:  # copies: student code can never mutate a tensor the test still holds
        return to_plain(_refs(args), "argument"), to_plain(_refs(kwargs), "keyword argument")
    except ValueRejected as exc:
        raise StudentAPIError(str(exc)) from None


def _refs(value: object) -> object:
    """A handle passed as an argument (at any depth) travels as the reference it holds."""
    if isinstance(value, Handle):
        return value._ref
    if isinstance(value, (list, tuple)):  # exactly a list or a tuple: the test's own arguments
        return type(value)(_refs(v) for v in value)
    if isinstance(value, dict):
        return {k: _refs(v) for k, v in value.items()}
    return value


class _Refusing:
    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        raise StudentAPIError(f"{type(self).__name__} has no attribute {name!r}: {self._offer}")

    def __setattr__(self, name: str, value: object) -> None:
        raise StudentAPIError(f"cannot set {name!r} through the student proxy")

    _offer = ""


class StudentProxy(_Refusing):
    """``student.<module>`` → :class:`StudentModule`. Keeps the handles made in one test."""

    __slots__ = ("_backend", "_handles")
    # the slots' types (set with object.__setattr__): declared, or mypy reads them via __getattr__
    _backend: Backend
    _handles: list[Handle]
    _offer = "use student.<module>.<function or class>(...)"

    def __init__(self, backend: Backend) -> None:
        object.__setattr__(self, "_backend", backend)
        object.__setattr__(self, "_handles", [])

    def __getattr__(self, module: str) -> StudentModule:
        if module.startswith("_"):
            raise StudentAPIError(f"no access to {module!r}: {self._offer}")
        return StudentModule(self, module)

    @property
    def isolated(self) -> _Isolated:
        """``student.isolated.<module>``: a fresh copy of the module in which the exercise classes
        it builds on are the grader's stand-ins (``grader/inside/standins.py``), so that it is
        graded on its own."""
        return _Isolated(self)

    def _wrap(self, value: object) -> Any:
        if isinstance(value, HandleRef):
            handle = Handle(self._backend, value)
            self._handles.append(handle)
            return handle
        return value

    def release_all(self) -> None:
        for handle in self._handles:
            self._backend.release(handle._ref.id)
        self._handles.clear()


class _Isolated(_Refusing):
    __slots__ = ("_proxy",)
    _proxy: StudentProxy
    _offer = "use student.isolated.<module>.<function or class>(...)"

    def __init__(self, proxy: StudentProxy) -> None:
        object.__setattr__(self, "_proxy", proxy)

    def __getattr__(self, module: str) -> StudentModule:
        if module.startswith("_"):
            raise StudentAPIError(f"no access to {module!r}: {self._offer}")
        return StudentModule(self._proxy, module + ISOLATED_SUFFIX)


class StudentModule(_Refusing):
    __slots__ = ("_module", "_proxy")
    _module: str
    _proxy: StudentProxy
    _offer = "use student.<module>.<function or class>(...)"

    def __init__(self, proxy: StudentProxy, module: str) -> None:
        object.__setattr__(self, "_proxy", proxy)
        object.__setattr__(self, "_module", module)

    def __getattr__(self, name: str) -> StudentCallable:
        if name.startswith("_"):
            raise StudentAPIError(f"no access to private name {name!r} in {self._module}")
        return StudentCallable(self._proxy, self._module, name)


class StudentCallable(_Refusing):
    """A student function or class: call it, ``measure(...)`` a function call, or take its
    ``grads(...)``."""

    __slots__ = ("_module", "_name", "_proxy")
    _module: str
    _name: str
    _proxy: StudentProxy
    _offer = (
        "call it, or use .measure(*args, **kwargs), .grads(*args, grad_output=g, **kwargs) or "
        ".measure_grads(*args, grad_output=g, **kwargs)"
    )

    def __init__(self, proxy: StudentProxy, module: str, name: str) -> None:
        for slot, value in (("_proxy", proxy), ("_module", module), ("_name", name)):
            object.__setattr__(self, slot, value)

    def __call__(self, *args: object, **kwargs: object) -> Any:
        args, kwargs = _outgoing(args, kwargs)
        return self._proxy._wrap(self._proxy._backend.call(self._module, self._name, args, kwargs))

    def measure(self, *args: object, **kwargs: object) -> tuple[Any, dict[str, float]]:
        """``(value, stats)``; ``stats["max_tensor_bytes"]`` is the largest tensor made during the
        call."""
        args, kwargs = _outgoing(args, kwargs)
        return self._proxy._backend.measure(self._module, self._name, args, kwargs)

    def measure_grads(
        self, *args: object, grad_output: object, **kwargs: object
    ) -> tuple[tuple[Any, tuple[Any, ...]], dict[str, float]]:
        """``((output, input_grads), stats)``: :meth:`grads`, with the figures of :meth:`measure`
        taken over the forward and the backward (a hand-written ``autograd.Function.backward``
        included)."""
        args, kwargs = _outgoing(args, kwargs)
        (grad_output,), _ = _outgoing((grad_output,), {})
        measured: tuple[tuple[Any, tuple[Any, ...]], dict[str, float]] = (
            self._proxy._backend.measure(self._module, self._name, args, kwargs, grad_output)
        )
        return measured

    def grads(
        self, *args: object, grad_output: object, **kwargs: object
    ) -> tuple[Any, tuple[Any, ...]]:
        """``(output, input_grads)``: one float64-capable forward and backward of a function, with
        ``grad_output`` (a tensor, or a tuple with a tensor or None per returned value) as the
        upstream gradient; ``input_grads[i]`` is the gradient of positional argument ``i`` (None for
        non-float arguments)."""
        args, kwargs = _outgoing(args, kwargs)
        (grad_output,), _ = _outgoing((grad_output,), {})
        return self._proxy._backend.grads(self._module, self._name, args, kwargs, grad_output)

    def on_meta(self, *args: object, **kwargs: object) -> Any:
        """Call with every tensor argument on the ``meta`` device (a module handle among them as a
        copy moved there): ``{"device", "shape", "dtype"}`` per returned tensor (a tensor the
        function makes on another device than its inputs' raises in the student's code). For a
        module class: built with these arguments (``device="meta"`` among them), ``{"parameters",
        "buffers"}``, each a description by name."""
        args, kwargs = _outgoing(args, kwargs)
        return self._proxy._backend.meta(self._module, self._name, args, kwargs)

    def __repr__(self) -> str:
        return f"<student {self._module}.{self._name}>"


class Handle(_Refusing):
    """A student ``nn.Module`` instance, reachable only through these methods."""

    __slots__ = ("_backend", "_ref")
    _backend: Backend
    _ref: HandleRef
    _offer = (
        "a module handle offers only calling it, state_dict, load_state_dict, named_parameters, "
        "named_buffers, transplant, train, eval, to, grads, on_meta and invoke"
    )

    def __init__(self, backend: Backend, ref: HandleRef) -> None:
        object.__setattr__(self, "_backend", backend)
        object.__setattr__(self, "_ref", ref)

    def _do(self, method: str, *args: object, **kwargs: object) -> Any:
        args, kwargs = _outgoing(args, kwargs)
        return self._backend.method(self._ref.id, method, args, kwargs)

    def __call__(self, *args: object, **kwargs: object) -> Any:
        return self._do("forward", *args, **kwargs)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return cast("dict[str, torch.Tensor]", self._do("state_dict"))

    def load_state_dict(
        self, state: dict[str, torch.Tensor], strict: bool = True
    ) -> dict[str, list[str]]:
        return cast("dict[str, list[str]]", self._do("load_state_dict", state, strict=strict))

    def named_parameters(self) -> dict[str, torch.Tensor]:
        return cast("dict[str, torch.Tensor]", self._do("named_parameters"))

    def named_buffers(self) -> dict[str, torch.Tensor]:
        return cast("dict[str, torch.Tensor]", self._do("named_buffers"))

    def transplant(self, params: dict[str, torch.Tensor]) -> dict[str, list[int]]:
        """A value test's weights in one round trip instead of three: every state-dict slot's shape
        from before, ``params`` loaded where the names and shapes match, an absent ``*bias``
        parameter zeroed (:func:`grader.inside.structure.transplant`)."""
        return cast("dict[str, list[int]]", self._do("transplant", params))

    def train(self) -> Handle:
        self._do("train")
        return self

    def eval(self) -> Handle:
        self._do("eval")
        return self

    def to(
        self, dtype: torch.dtype | None = None, device: str | torch.device | None = None
    ) -> Handle:
        self._do("to", dtype=dtype, device=str(device) if device is not None else None)
        return self

    def grads(
        self, *inputs: object, grad_output: torch.Tensor, **kwargs: object
    ) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
        """One forward and backward: ``(output, input_grads, param_grads)``."""
        return cast(
            "tuple[Any, tuple[Any, ...], dict[str, Any]]",
            self._do("grads", *inputs, grad_output=grad_output, **kwargs),
        )

    def invoke(self, method: str, *args: object, **kwargs: object) -> Any:
        """Call a public method the student's class defines (``cache.invoke("update", k, v)``),
        without grad."""
        return self._do("invoke", method, *args, **kwargs)

    def on_meta(self, *args: object, **kwargs: object) -> Any:
        """``forward`` of a copy of the module moved to ``meta``, on meta inputs: descriptions, as
        for functions."""
        return self._do("meta_forward", *args, **kwargs)

    def __repr__(self) -> str:
        return f"<student {self._ref.class_name} handle #{self._ref.id}>"
