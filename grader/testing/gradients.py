"""Float64 gradient checks for student functions: the vector-Jacobian product against an oracle's.

``student.<module>.<fn>.grads(*inputs, grad_output=g)`` runs one forward and backward inside the executor;
the oracle is a float64 hand computation run with autograd here. A gradient that is missing (``.detach()``,
``.data``, ``torch.no_grad()``), wrong, or a backward that raises (an in-place op on a tensor autograd saved)
fails with a hint that names the mistake.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from grader.student.proxy import StudentCallable
from grader.testing.checks import expect_tensor, fail, hinted

GRAD_HINT = ("keep the computation differentiable: no .detach(), .data, .item(), torch.no_grad() or new tensors "
             "built from values; never modify in place (x /= s, x.masked_fill_) a tensor autograd still needs")


GradOutput = torch.Tensor | tuple[torch.Tensor | None, ...]  # one upstream gradient per output (None: that output unused)


def oracle_grads(oracle: Callable[..., Any], inputs: Sequence[torch.Tensor],
                 grad_output: GradOutput) -> tuple[Any, tuple[Any, ...]]:
    """``(outputs, input_grads)`` of ``oracle(*inputs)`` for the upstream gradient ``grad_output``."""
    leaves = [x.detach().clone().requires_grad_(True) for x in inputs]
    out = oracle(*leaves)
    outs, gs = (out, grad_output) if isinstance(out, tuple) else ((out,), (grad_output,))
    loss = sum((o * g).sum() for o, g in zip(outs, gs) if g is not None)
    loss.backward()
    detached = tuple(o.detach() for o in outs)
    return (detached if isinstance(out, tuple) else detached[0]), tuple(x.grad for x in leaves)


def expect_grads(student_fn: StudentCallable, inputs: Sequence[torch.Tensor], oracle: Callable[..., Any],
                 grad_output: GradOutput, *,
                 what: str, names: Sequence[str], hint: str = GRAD_HINT, **kwargs: Any) -> None:
    """Fail unless the student function's float64 output and input gradients match the oracle's."""
    __tracebackhide__ = True
    with hinted(hint):  # a backward that raises (an in-place op on a saved tensor) gets the gradient hint
        out, grads = student_fn.grads(*inputs, grad_output=grad_output, **kwargs)
    want_out, want_grads = oracle_grads(lambda *xs: oracle(*xs, **kwargs), inputs, grad_output)
    outs, want_outs = (out, want_out) if isinstance(want_out, tuple) else ((out,), (want_out,))
    if not isinstance(outs, tuple) or len(outs) != len(want_outs):
        fail(f"{what}: got {type(out).__name__}, expected {len(want_outs)} output(s)")
    for i, (o, w) in enumerate(zip(outs, want_outs)):
        expect_tensor(o, w, what=f"{what}: output {i}" if len(want_outs) > 1 else f"{what}: output",
                      hint="float64 inputs must give float64-accurate outputs: no .float() or float32 tensors inside")
    for name, got, want in zip(names, grads, want_grads):
        if got is None:
            fail(f"{what}: got no gradient for {name}, expected one (the output does not depend on it through "
                 "autograd)", hint)
        expect_tensor(got, want, what=f"{what}: gradient of {name}", hint=hint)
