"""Runs student code: serves the proxy's operations over a submission's modules
(:mod:`grader.inside.loading` imports them and guards every run of their code).

This is the untrusted side of the door. The in-process backend calls it directly; the sandbox
worker runs the very same class inside an isolated interpreter. It must never import tests or
reference solutions. Every result leaves through :func:`~grader.protocol.values.to_plain`.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Unpack

import torch
from torch import nn

from grader.inside import handles, ops, standins, structure
from grader.inside.loading import Options, StudentCode
from grader.protocol.errors import StudentAPIError, StudentError
from grader.protocol.values import Args, HandleRef, Kwargs, ValueRejected, to_plain

METHODS = frozenset(
    {
        "forward",
        "state_dict",
        "load_state_dict",
        "named_parameters",
        "named_buffers",
        "transplant",
        "train",
        "eval",
        "to",
        "grads",
        "meta_forward",
        "invoke",
    }
)


class Executor(StudentCode):
    """Serve ``call``/``method``/``measure``/``grads``/``release`` over the modules in ``root``."""

    def __init__(
        self, root: Path | str, *, copies: bool = True, **options: Unpack[Options]
    ) -> None:
        """``copies``: results are copies the caller may keep (in-process); False in a worker,
        which encodes each result at once (the wire's copy is the only one made)."""
        super().__init__(root, **options)
        self.handles: dict[int, tuple[nn.Module, str]] = {}
        self._ids = itertools.count(1)
        self.copies = copies

    # -- operations ---------------------------------------------------------------------------
    def call(self, module: str, name: str, args: Args, kwargs: Kwargs) -> Any:
        args, kwargs = handles.resolve(args, kwargs, self.handles)
        target = self._lookup(module, name)
        where = _where(module, name)
        if isinstance(target, type) and issubclass(target, nn.Module):
            instance = self._guarded(where, lambda: target(*args, **kwargs))
            return self._register(instance, where)
        if isinstance(target, type) or not callable(target):
            raise StudentAPIError(f"{where} is not a function or an nn.Module class")
        return self._plain(
            self._guarded(
                where,
                lambda: ops.unchanged(where, args, kwargs, lambda: _no_grad(target, args, kwargs)),
            ),
            f"{where} returned",
        )

    def method(self, handle: int, method: str, args: Args, kwargs: Kwargs) -> Any:
        if method not in METHODS:
            raise StudentAPIError(
                f"handles offer only {', '.join(sorted(METHODS))}; not {method!r}"
            )
        if handle not in self.handles:
            raise StudentAPIError(f"no module handle {handle} (released, or the worker restarted)")
        obj, scope = self.handles[handle]
        args, kwargs = handles.resolve(args, kwargs, self.handles)
        where = f"{type(obj).__name__}.{method}"
        result = self._guarded(
            scope, lambda: getattr(self, f"_m_{method}")(obj, *args, **kwargs), where=where
        )
        return self._plain(result, f"{where} returned")

    def measure(
        self, module: str, name: str, args: Args, kwargs: Kwargs, grad_output: object = None
    ) -> tuple[Any, dict[str, float]]:
        """Call a function and report the largest tensor storage any torch op produced meanwhile;
        with a ``grad_output``, its forward AND backward as :meth:`grads` runs them (the value is
        ``grads``'s)."""
        from grader.inside.peak import PeakStorage

        target, where = self._lookup(module, name), _where(module, name)
        if isinstance(target, type) or not callable(target):
            raise StudentAPIError(f"{where} is not a function")
        args, kwargs = handles.resolve(args, kwargs, self.handles)
        run = (
            (lambda: _no_grad(target, args, kwargs))
            if grad_output is None
            else (
                lambda: ops.unchanged(
                    where, args, kwargs, lambda: ops.vjp(target, args, kwargs, grad_output)
                )
            )
        )
        start = time.perf_counter()
        with PeakStorage() as peak:  # a dispatch mode: it sees the backward's tensors as well
            value = self._guarded(where, run)
        stats = {"max_tensor_bytes": float(peak.max_bytes), "seconds": time.perf_counter() - start}
        return self._plain(value, f"{where} returned"), stats

    def grads(
        self, module: str, name: str, args: Args, kwargs: Kwargs, grad_output: object
    ) -> tuple[Any, tuple[Any, ...]]:
        """One forward and backward of a function: ``(output, input_grads)`` for ``grad_output`` (a
        tensor, or a tuple with a tensor or None per output); the floating-point positional tensors
        are the inputs."""
        target = self._lookup(module, name)
        where = _where(module, name)
        if isinstance(target, type) or not callable(target):
            raise StudentAPIError(f"{where} is not a function")
        args, kwargs = handles.resolve(args, kwargs, self.handles)
        value = self._guarded(
            where,
            lambda: ops.unchanged(
                where, args, kwargs, lambda: ops.vjp(target, args, kwargs, grad_output)
            ),
        )
        # ops.vjp's (output, grads)
        plain: tuple[Any, tuple[Any, ...]] = self._plain(value, f"{where} returned")
        return plain

    def meta(self, module: str, name: str, args: Args, kwargs: Kwargs) -> Any:
        """Call a function with every tensor argument moved to the ``meta`` device, and every module
        handle as a copy moved there; describe what it returned (meta tensors have no data: only
        device, shape and dtype). A module class is built from its arguments as given: its
        parameters and buffers are described."""
        target = self._lookup(module, name)
        where = _where(module, name)
        if isinstance(target, type) and issubclass(target, nn.Module):
            # a module built here (``device="meta"`` among its arguments): its parameters and
            # buffers described, to show where its constructor put them
            return ops.describe(
                self._guarded(where, lambda: ops.on_meta(lambda _: target(*args, **kwargs)))
            )
        if isinstance(target, type) or not callable(target):
            raise StudentAPIError(f"{where} is not a function")
        args, kwargs = handles.resolve(args, kwargs, self.handles)
        # the copies inside the guard: copying a student module runs its code (__deepcopy__, an
        # overridden _apply)
        return ops.describe(
            self._guarded(
                where,
                lambda: ops.on_meta(
                    lambda meta: target(*meta.to_meta(args), **meta.to_meta(kwargs))
                ),
            )
        )

    def release(self, handle: int) -> None:
        self.handles.pop(handle, None)

    # -- handle methods (run inside the guard) -------------------------------------------------
    def _m_forward(self, m: nn.Module, *args: object, **kwargs: object) -> Any:
        with torch.no_grad():
            return ops.unchanged(
                f"{type(m).__name__}.forward", args, kwargs, lambda: m(*args, **kwargs)
            )

    def _m_invoke(self, m: nn.Module, name: str, *args: object, **kwargs: object) -> Any:
        method = handles.method_of(m, name)
        with torch.no_grad():
            return ops.unchanged(
                f"{type(m).__name__}.{name}", args, kwargs, lambda: method(*args, **kwargs)
            )

    # structure is read from nn.Module's registries (grader.inside.structure), never asked of the
    # student's methods
    def _m_state_dict(self, m: nn.Module) -> dict[str, Any]:
        return structure.state_dict(m)

    def _m_load_state_dict(
        self, m: nn.Module, state: dict[str, Any], strict: bool = True
    ) -> dict[str, list[str]]:
        return structure.load_state_dict(m, state, strict=strict)

    def _m_named_parameters(self, m: nn.Module) -> dict[str, torch.Tensor]:
        return structure.named_parameters(m)

    def _m_named_buffers(self, m: nn.Module) -> dict[str, torch.Tensor]:
        return structure.named_buffers(m)

    def _m_transplant(self, m: nn.Module, params: dict[str, Any]) -> dict[str, list[int]]:
        return structure.transplant(m, params)

    def _m_train(self, m: nn.Module) -> None:
        m.train()

    def _m_eval(self, m: nn.Module) -> None:
        m.eval()

    def _m_to(
        self,
        m: nn.Module,
        dtype: torch.dtype | None = None,
        device: str | torch.device | None = None,
    ) -> None:
        m.to(device=device, dtype=dtype)

    def _m_grads(
        self, m: nn.Module, *inputs: object, grad_output: torch.Tensor, **kwargs: object
    ) -> tuple[torch.Tensor, tuple[torch.Tensor | None, ...], dict[str, torch.Tensor | None]]:
        m.zero_grad(set_to_none=True)
        leaves = [
            x.detach().clone().requires_grad_(True)
            if isinstance(x, torch.Tensor) and x.is_floating_point()
            else x
            for x in inputs
        ]
        with torch.enable_grad():
            out = m(*leaves, **kwargs)
            if not isinstance(out, torch.Tensor):
                raise TypeError(f"forward returned {type(out).__name__}, expected a tensor")
            if out.shape != grad_output.shape:
                raise ValueError(
                    f"forward returned shape {tuple(out.shape)}, expected {tuple(grad_output.shape)}"
                )
            # the vector-Jacobian product with grad_output, exactly (1 * g == g); out.backward(g)
            # would import sympy on first use: 0.5 s in every fresh worker
            (out * grad_output).sum().backward()
        input_grads = tuple(
            x.grad if isinstance(x, torch.Tensor) and x.requires_grad else None for x in leaves
        )
        param_grads = {n: p.grad for n, p in structure.named_parameters(m).items()}
        return out.detach(), input_grads, param_grads

    def _m_meta_forward(self, m: nn.Module, *args: object, **kwargs: object) -> object:
        """``forward`` of a copy moved to ``meta`` (parameters and registered buffers follow
        ``.to``), on meta inputs; the handle's own module keeps its weights."""
        return ops.describe(
            ops.on_meta(lambda meta: meta.to_meta(m)(*meta.to_meta(args), **meta.to_meta(kwargs)))
        )

    # -- internals -----------------------------------------------------------------------------
    def _plain(self, value: object, where: str) -> Any:
        """Convert a student result; a value that may not cross is the student's error, not the
        test's."""
        try:
            return to_plain(value, where, copy=self.copies)
        except ValueRejected as exc:
            raise StudentError(str(exc), exc_type="ValueRejected") from None

    def _register(self, instance: nn.Module, scope: str) -> HandleRef:
        handle = next(self._ids)
        self.handles[handle] = (instance, scope)
        return HandleRef(handle, type(instance).__name__)


def _where(module: str, name: str) -> str:
    """``module.name`` as the student wrote it (an isolated copy is the same module to them)."""
    return f"{standins.split_isolated(module)[0]}.{name}"


def _no_grad(fn: Callable[..., Any], args: Args, kwargs: Kwargs) -> Any:
    with torch.no_grad():
        return fn(*args, **kwargs)
