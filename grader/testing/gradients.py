"""Float64 gradient checks for student functions: the vector-Jacobian product against an oracle's.

``student.<module>.<fn>.grads(*inputs, grad_output=g)`` runs one forward and backward inside the
executor; the oracle is a float64 hand computation run with autograd here. A gradient that is
missing, or wrong while the output is right, shows a computation autograd does not see
(``.detach()``, ``.data``, ``torch.no_grad()``): the failure says so (diagnosis ``no-gradient``); a
backward that raises is explained by its own exception (an in-place op on a tensor autograd saved:
:data:`grader.testing.diagnosis.TELLTALES`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from grader.student.proxy import StudentCallable
from grader.testing.checks import expect_tensor, fail
from grader.testing.diagnosis import Detector, Suspects, tag

GRAD_HINT = (
    "keep the computation differentiable: no .detach(), .data, .item(), torch.no_grad() or new tensors "
    "built from values; never modify in place (x /= s, x.masked_fill_) a tensor autograd still needs"
)
CUT_OFF = (
    "the output is right but this gradient is not: part of the computation is invisible to autograd "
    "(.detach(), .data, torch.no_grad(), or a tensor rebuilt from values)"
)
# the one suspect of a gradient check reached with the output already right (autograd computes both)
GRADIENT_SUSPECTS = Suspects((Detector("no-gradient", lambda got, expected: CUT_OFF),))


def no_gradient(what: str, name: str) -> None:
    """Fail for a gradient that did not come back: the output does not depend on ``name`` through
    autograd."""
    __tracebackhide__ = True
    fail(
        f"{what}: got no gradient for {name}, expected one\n  "
        + tag(
            "no-gradient",
            "the output does not depend on it through autograd (.detach(), .data, torch.no_grad(), or a "
            "tensor rebuilt from values)",
        )
    )


# one upstream gradient per output (None: that output unused)
GradOutput = torch.Tensor | tuple[torch.Tensor | None, ...]


def oracle_grads(
    oracle: Callable[..., Any], inputs: Sequence[torch.Tensor], grad_output: GradOutput
) -> tuple[Any, tuple[Any, ...]]:
    """``(outputs, input_grads)`` of ``oracle(*inputs)`` for the upstream gradient
    ``grad_output``."""
    leaves = [x.detach().clone().requires_grad_(True) for x in inputs]
    out = oracle(*leaves)
    outs, gs = (out, grad_output) if isinstance(out, tuple) else ((out,), (grad_output,))
    loss = sum((o * g).sum() for o, g in zip(outs, gs) if g is not None)
    loss.backward()
    detached = tuple(o.detach() for o in outs)
    return (detached if isinstance(out, tuple) else detached[0]), tuple(x.grad for x in leaves)


def expect_grads(
    student_fn: StudentCallable,
    inputs: Sequence[torch.Tensor],
    oracle: Callable[..., Any],
    grad_output: GradOutput,
    *,
    what: str,
    names: Sequence[str],
    suspects: Suspects | None = None,
    gradient_suspects: Suspects | Sequence[Suspects] = GRADIENT_SUSPECTS,
    **kwargs: Any,
) -> None:
    """Fail unless the student function's float64 output and input gradients match the oracle's
    (``suspects``: the output's misconceptions; ``gradient_suspects``: the gradients', by default
    the one that shows when autograd computes both and only the gradient is wrong: a custom backward
    has others; one per input, or one for all)."""
    __tracebackhide__ = True
    got = student_fn.grads(*inputs, grad_output=grad_output, **kwargs)
    expect_grads_of(
        got,
        inputs,
        lambda *xs: oracle(*xs, **kwargs),
        grad_output,
        what=what,
        names=names,
        suspects=suspects,
        gradient_suspects=gradient_suspects,
    )


def expect_grads_of(
    got: tuple[Any, tuple[Any, ...]],
    inputs: Sequence[torch.Tensor],
    oracle: Callable[..., Any],
    grad_output: GradOutput,
    *,
    what: str,
    names: Sequence[str],
    suspects: Suspects | None = None,
    gradient_suspects: Suspects | Sequence[Suspects] = GRADIENT_SUSPECTS,
) -> None:
    """:func:`expect_grads` on what a ``.grads`` call already gave back (``got``): a test that must
    read its output first (a dropout draw) builds the oracle from it, then compares."""
    __tracebackhide__ = True
    out, grads = got
    want_out, want_grads = oracle_grads(oracle, inputs, grad_output)
    outs, want_outs = (out, want_out) if isinstance(want_out, tuple) else ((out,), (want_out,))
    if not isinstance(outs, tuple) or len(outs) != len(want_outs):
        fail(f"{what}: got {type(out).__name__}, expected {len(want_outs)} output(s)")
    for i, (o, w) in enumerate(zip(outs, want_outs)):
        expect_tensor(
            o,
            w,
            what=f"{what}: output {i}" if len(want_outs) > 1 else f"{what}: output",
            suspects=suspects,
        )
    for i, (name, got, want) in enumerate(zip(names, grads, want_grads)):
        if got is None:
            no_gradient(what, name)
        each = (
            gradient_suspects if isinstance(gradient_suspects, Suspects) else gradient_suspects[i]
        )
        expect_tensor(got, want, what=f"{what}: gradient of {name}", suspects=each)
