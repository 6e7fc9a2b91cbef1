"""How the executor runs one call for the tests' special questions (inside the sandbox).

- :func:`unchanged`: the call must leave the caller's tensors as they were (inputs are the
  caller's);
- :func:`vjp`: a function's output and its vector-Jacobian product (gradients of plain functions);
- :func:`on_meta` / :func:`describe`: run on the ``meta`` device (with values beside:
  :mod:`grader.inside.valued_meta`) and report only where, what shape and what dtype each result
  is (tensors made inside must follow the input's device); a module among the arguments (a handle:
  ``decode(model, cache, x)``) goes there as a copy, the handle's own keeps its data.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from grader.inside.valued_meta import ValuedMeta
from grader.protocol.errors import StudentError
from grader.protocol.values import Args, Kwargs


def _safe(exc: BaseException) -> str:
    try:
        return str(exc)[:2000]
    except BaseException:  # noqa: BLE001 - a hostile __str__
        return "<exception message could not be read>"


def unchanged(where: str, args: Args, kwargs: Kwargs, run: Callable[[], Any]) -> Any:
    """Run ``run`` and make sure it left the caller's tensors as they were (inputs are the
    caller's)."""
    given = [
        *((f"argument {i + 1}", a) for i, a in enumerate(args)),
        *((f"argument {k!r}", v) for k, v in kwargs.items()),
    ]
    before = [(label, t, t.detach().clone()) for label, t in given if isinstance(t, torch.Tensor)]
    value = run()
    for label, tensor, copy in before:
        if not same(tensor, copy):
            raise StudentError(
                f"{where} changed its {label} in place; the caller's tensors are theirs: compute "
                "new tensors (x = x - m, not x -= m / x.sub_(m) / x[...] = ...)",
                exc_type="InputModified",
            )
    return value


def same(now: torch.Tensor, before: torch.Tensor) -> bool:
    if now.shape != before.shape or now.dtype != before.dtype:
        return False
    if now.is_floating_point() or now.is_complex():
        return bool(
            torch.equal(now, before) or torch.allclose(now, before, rtol=0, atol=0, equal_nan=True)
        )
    return bool(torch.equal(now, before))


def vjp(
    fn: Callable[..., Any], args: Args, kwargs: Kwargs, grad_output: object
) -> tuple[Any, tuple[Any, ...]]:
    """``fn``'s output and the vector-Jacobian product of ``grad_output`` with it, per positional
    input."""
    leaves = [
        a.detach().clone().requires_grad_(True)
        if isinstance(a, torch.Tensor) and a.is_floating_point()
        else a
        for a in args
    ]
    with torch.enable_grad():
        out = fn(*leaves, **kwargs)
        outs, gs = (out, grad_output) if isinstance(out, tuple) else ((out,), (grad_output,))
        if not isinstance(gs, tuple) or len(gs) != len(outs):
            raise TypeError(
                f"returned {len(outs)} value(s), expected {len(gs) if isinstance(gs, tuple) else 1}"
            )
        terms = [vjp_term(o, g, i) for i, (o, g) in enumerate(zip(outs, gs)) if g is not None]
        # sum(o * g) exactly (1 * g == g); out.backward(g) would import sympy on first use
        if terms and any(t.requires_grad for t in terms):
            torch.stack(terms).sum().backward()
    grads = tuple(
        a.grad if isinstance(a, torch.Tensor) and a.requires_grad else None for a in leaves
    )
    detached = tuple(o.detach() if isinstance(o, torch.Tensor) else o for o in outs)
    return (detached if isinstance(out, tuple) else detached[0]), grads


def vjp_term(out: object, grad: torch.Tensor, i: int) -> torch.Tensor:
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"output {i} is a {type(out).__name__}, expected a tensor")
    if out.shape != grad.shape:
        raise ValueError(f"output {i} has shape {tuple(out.shape)}, expected {tuple(grad.shape)}")
    return (out * grad).sum()


def on_meta(run: Callable[[ValuedMeta], Any]) -> Any:
    """Run ``run(meta)`` without autograd on the ``meta`` device with values
    (:class:`ValuedMeta`: ``meta.to_meta(...)`` moves its arguments there); torch's
    NotImplementedError for an op meta cannot do even with values is no stub of the student's: it
    becomes a RuntimeError with the same traceback. The CPU generator is left as it was: the
    values' random draws (dropout) are no draws a real device would take from it."""
    meta = ValuedMeta()
    try:
        with torch.random.fork_rng(devices=[]), torch.no_grad(), meta:
            return run(meta)
    except NotImplementedError as exc:
        raise RuntimeError(f"on the meta device: {_safe(exc)}").with_traceback(
            exc.__traceback__
        ) from None


def describe(value: object) -> object:
    """What a (meta) result is without its data: ``{"device", "shape", "dtype"}`` per tensor; for a
    module, that of each parameter and buffer by name."""
    if isinstance(value, torch.Tensor):
        return {
            "device": str(value.device),
            "shape": tuple(int(n) for n in value.shape),
            "dtype": str(value.dtype),
        }
    if isinstance(value, (tuple, list)):
        return tuple(describe(v) for v in value)
    if isinstance(value, nn.Module):  # where a constructor put its tensors
        return {
            "parameters": {n: describe(t) for n, t in value.named_parameters()},
            "buffers": {n: describe(t) for n, t in value.named_buffers()},
        }
    return type(value).__name__
