"""Parameters for value tests: the reference's weights transplanted into the student's module.

A value test checks what a module computes, not how its parameters are named: that is the structure
tests' job, and one slip must be charged there once, not again by every value test of the exercise.
So a value test copies the reference's parameters into the student's module where the module has
them, and makes the oracle follow the module where it lacks one it can do without: a missing bias
counts as zero, and a parameter with a specified initial value (``defaults``) keeps that value. Any
other missing name, or a wrong shape, fails with a message that names it: then nothing can be
compared.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from grader.inside import structure
from grader.student.proxy import Handle
from grader.testing.catalogue.structure import diagnose_structure
from grader.testing.checks import expect_tensor, fail
from grader.testing.diagnosis import Suspects
from grader.testing.gradients import GRADIENT_SUSPECTS, no_gradient

__all__ = ["compared_grads", "expect_grads_of", "expect_module_grads", "params_of", "transplant"]


def params_of(module: nn.Module) -> dict[str, torch.Tensor]:
    """Parameters only (never buffers: how a student stores a mask is their business), detached
    copies."""
    return {k: v.detach().clone() for k, v in module.named_parameters()}


def transplant(
    h: Handle | nn.Module,
    source: nn.Module | Mapping[str, torch.Tensor],
    *,
    hint: str,
    defaults: Mapping[str, torch.Tensor] | None = None,
) -> dict[str, torch.Tensor]:
    """Load ``source``'s parameters into the student handle ``h``; return the parameters the oracle
    must use.

    With a reference module as ``source``, the module itself is adjusted in place too, so that an
    oracle that runs it (``ref(x)``) follows the student's structure."""
    params = (
        params_of(source)
        if isinstance(source, nn.Module)
        else {k: v.detach().clone() for k, v in source.items()}
    )
    # one round trip: the shapes of the parameters and buffers (a value kept as a buffer still
    # loads) from before the load; a bias the reference lacks (qkv_bias=False) but the module keeps
    # is zeroed, as if absent (parameters only: GPT-2's causal mask is a buffer named `bias`)
    loaded = h.transplant(params) if isinstance(h, Handle) else structure.transplant(h, params)
    own = _shapes(loaded, hint)
    used = {
        name: _stand_in(name, value, own, hint, defaults or {}) for name, value in params.items()
    }
    if isinstance(source, nn.Module):
        with torch.no_grad():
            for name, param in source.named_parameters():
                param.copy_(used[name])
    return used


def _shapes(reply: object, hint: str) -> dict[str, tuple[int, ...]]:
    """The worker's answer, strictly read: names and shapes, or the test fails saying so."""
    __tracebackhide__ = True
    if isinstance(reply, dict) and all(
        isinstance(k, str) and isinstance(v, list) and all(type(n) is int and n >= 0 for n in v)
        for k, v in reply.items()
    ):
        return {k: tuple(v) for k, v in reply.items()}
    fail(f"the module's parameters could not be read: got {type(reply).__name__}", hint)


def compared_grads(
    ref: nn.Module, got: Mapping[str, torch.Tensor | None]
) -> Iterator[tuple[str, torch.Tensor | None, torch.Tensor | None]]:
    """``(name, student's gradient, reference's)`` for each of the reference's parameters, leaving
    out a bias the student's module does not have (the structure test charges that, once)."""
    for name, param in ref.named_parameters():
        if name in got or not name.endswith("bias"):
            yield name, got.get(name), param.grad


def expect_module_grads(
    h: Handle,
    ref: nn.Module,
    *inputs: torch.Tensor,
    grad_output: torch.Tensor,
    names: Sequence[str] = ("x",),
    suspects: Suspects | None = None,
) -> dict[str, torch.Tensor | None]:
    """One forward and backward of the student's module ``h`` against ``ref`` (same weights, usually
    float64): the output (``suspects``: its misconceptions), the gradient of each floating-point
    input (``names``, in order) and of each parameter must match. Returns the student's parameter
    gradients for further checks."""
    __tracebackhide__ = True
    return expect_grads_of(
        h.grads(*inputs, grad_output=grad_output),
        ref,
        *inputs,
        grad_output=grad_output,
        names=names,
        suspects=suspects,
    )


def expect_grads_of(
    given: tuple[Any, tuple[Any, ...], dict[str, Any]],
    ref: nn.Module,
    *inputs: torch.Tensor,
    grad_output: torch.Tensor,
    names: Sequence[str] = ("x",),
    suspects: Suspects | None = None,
    what: str = "float64 output",
) -> dict[str, torch.Tensor | None]:
    """:func:`expect_module_grads` on what a ``Handle.grads`` call already gave back (``got``): a
    test that must look at the output first (to read a dropout draw from it) compares the rest
    afterwards."""
    __tracebackhide__ = True
    out, input_grads, param_grads = given
    leaves = [x.clone().requires_grad_(x.is_floating_point()) for x in inputs]
    expected = ref(*leaves)
    (
        expected * grad_output
    ).sum().backward()  # the same vector-Jacobian product; .backward(g) imports sympy
    expect_tensor(out, expected.detach(), what=what, suspects=suspects)
    floating = [
        (leaf, got)
        for leaf, got in zip(leaves, input_grads, strict=True)
        if leaf.is_floating_point()
    ]
    for name, (leaf, got) in zip(names, floating, strict=True):
        assert leaf.grad is not None, f"the oracle's output does not depend on {name}"
        if got is None:
            no_gradient("backward", f"the input {name}")
        expect_tensor(
            got, leaf.grad, what=f"gradient of the input {name}", suspects=GRADIENT_SUSPECTS
        )
    for pname, got, want in compared_grads(ref, param_grads):
        assert want is not None, f"the oracle's output does not depend on {pname}"
        if got is None:
            no_gradient("backward", pname)
        expect_tensor(got, want, what=f"gradient of {pname}", suspects=GRADIENT_SUSPECTS)
    return dict(param_grads)


def _stand_in(
    name: str,
    value: torch.Tensor,
    own: Mapping[str, tuple[int, ...]],
    hint: str,
    defaults: Mapping[str, torch.Tensor],
) -> torch.Tensor:
    """The value the oracle uses for ``name``: the reference's, or what the student's module has
    instead."""
    __tracebackhide__ = True
    if name in own:
        if own[name] != tuple(value.shape):
            said = diagnose_structure({name: own[name]}, {name: tuple(value.shape)})
            fail(
                f"parameter {name}: got shape {own[name]}, expected {tuple(value.shape)}"
                + (f"\n  {said}" if said else ""),
                None if said else hint,
            )
        return value
    if name.endswith("bias"):
        return torch.zeros_like(
            value
        )  # a layer without its bias (the structure test charges the omission)
    if name in defaults:
        return defaults[name].to(value.dtype).expand_as(value).clone()
    said = diagnose_structure(
        dict(own),
        {**own, name: tuple(value.shape)},
    )
    fail(
        f"named_parameters(): your module has no {name!r} (it has {sorted(own)[:6]})"
        + (f"\n  {said}" if said else ""),
        None if said else hint,
    )
