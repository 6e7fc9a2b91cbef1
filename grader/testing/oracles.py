"""Oracles shared by the hidden suites: what dropout on the attention weights must look like.

A module in training mode returns ``out = (keep * weights / (1 - p)) @ values`` (then maybe a linear
map the test can undo), with ``keep`` a random 0/1 mask. The test knows ``weights`` and ``values``
(float64 hand computations) but not ``keep``; when the value rows are linearly independent (S <=
Ev), the coefficient of each value row in ``out`` is recovered exactly by a least-squares solve, and
must be either 0 (dropped) or ``weights / (1 - p)`` (kept). Dropout anywhere else (on the scores,
the values, the output) or with the wrong scale gives coefficients of neither kind, whatever ``p``
is.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from grader.testing.checks import expect_shape, fail
from grader.testing.diagnosis import Detector, Suspects, close, tag


def value_coefficients(out: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """``c`` with ``out == c @ values``: (..., L, Ev) and (..., S, Ev) -> (..., L, S), in
    float64."""
    v = values.double()
    # least squares through the normal equations: (c V)(V^T) = out V^T, with V V^T (S x S)
    # invertible
    solved: torch.Tensor = torch.linalg.solve(
        v @ v.transpose(-2, -1), v @ out.double().transpose(-2, -1)
    )
    return solved.transpose(-2, -1)


def expect_dropout_on_weights(
    out: torch.Tensor,
    weights: torch.Tensor,
    values: torch.Tensor,
    p: float,
    *,
    what: str,
    tol: float = 1e-6,
) -> None:
    """Fail unless ``out`` is ``(keep * weights / (1 - p)) @ values`` with about a fraction ``p``
    dropped."""
    __tracebackhide__ = True
    expect_shape(out, tuple(weights.shape[:-1]) + (values.shape[-1],), what=what)
    bad = int((~torch.isfinite(out)).sum())
    if bad:
        fail(
            f"{what}: got {bad} NaN/inf value(s) of {out.numel()}, expected all finite\n  "
            + tag(
                "dropout-wrong-place",
                "NaN or inf in training mode only: the random zeros hit the -inf scores of "
                "masked keys (dropout on the scores, before the softmax)",
            )
        )
    coeff, scaled = value_coefficients(out, values), weights.double() / (1 - p)
    # the solve amplifies rounding by the condition number of the value rows: widen the tolerance by
    # it
    slack = (
        tol
        * torch.linalg.cond(values.double()).clamp(min=1.0)[..., None, None]
        * (1 + scaled.abs())
    )
    dropped, kept = coeff.abs() <= slack, (coeff - scaled).abs() <= slack
    live = scaled.abs() > 1e-3  # weights clearly non-zero: there, dropped and kept are told apart
    _expect_the_right_scale(coeff, weights, live & ~dropped, p, what)
    stray = ~(dropped | kept)
    if bool(stray.any()):
        index = tuple(int(i) for i in torch.nonzero(stray)[0])
        fail(
            f"{what}: in training mode with dropout={p}, the output is not (dropped-out weights) @ values: an "
            f"attention weight of {float(weights[index]):.4g} counts {float(coeff[index]):.4g} times its value row, "
            f"expected 0 (dropped) or weight / (1 - p) = {float(scaled[index]):.4g} (kept)\n  "
            + tag(
                "dropout-wrong-place",
                "each attention weight's share of the output "
                "is neither 0 nor weight / (1 - p): the random zeros fall somewhere else than on the attention "
                "weights (the scores, the values, the output)",
            )
        )
    expect_independent_draws(dropped & live, live, p, what=what)
    n = max(int(live.sum()), 1)
    frac = float((dropped & live).sum()) / n
    fair = max(0.05, 5 * (p * (1 - p) / n) ** 0.5)  # 5 sigma: a fair draw never fails
    if abs(frac - p) > fair:
        said = (
            tag(
                "dropout-keep-prob",
                f"about 1 - p = {1 - p:.0%} are dropped: p is read as the probability of "
                "keeping a weight",
            )
            if abs(frac - (1 - p)) <= fair
            else None
        )
        fail(
            f"{what}: got {frac:.1%} of the attention weights dropped with dropout={p}, expected about {p:.0%}"
            + (f"\n  {said}" if said else "")
        )


def expect_independent_draws(
    dropped: torch.Tensor, live: torch.Tensor, p: float, *, what: str
) -> None:
    """Fail when every batch item (dimension 0), or every head (dimension 1 of a 4-d draw), dropped
    exactly the same weights: one mask drawn once and broadcast. Checked only where a fair draw
    could not do that by chance (below 1e-9: every entry outside the first slice repeating it has
    probability at most max(p, 1 - p))."""
    __tracebackhide__ = True
    for name, dim in (("batch item", 0), ("head", 1))[: 1 + (dropped.dim() >= 4)]:
        if dropped.dim() < 3 or dropped.shape[dim] < 2:
            continue
        drops, both = dropped.movedim(dim, 0), live.movedim(dim, 0) & live.movedim(dim, 0)[:1]
        if int(both[1:].sum()) * math.log(max(p, 1 - p)) > math.log(1e-9):
            continue  # too few weights for a verdict a fair draw never fails
        if bool(((drops == drops[:1]) | ~both).all()):
            fail(
                f"{what}: every {name} drops exactly the same attention weights ({drops.shape[0]} {name}s), "
                f"expected an independent draw per {name}\n  "
                + tag(
                    "dropout-shared-mask",
                    f"one dropout mask is drawn once and broadcast to every {name} "
                    "(torch.rand(T, T) instead of torch.rand_like(weights)): each must draw its own",
                )
            )


def _expect_the_right_scale(
    coeff: torch.Tensor, weights: torch.Tensor, survivors: torch.Tensor, p: float, what: str
) -> None:
    """Survivors all scaled by one wrong factor: the drop probability was read as a keep
    probability."""
    __tracebackhide__ = True
    ratios = (coeff / weights.double())[survivors]
    if ratios.numel() < 2 or float(ratios.max() - ratios.min()) > 1e-4 * float(ratios.abs().max()):
        return  # no single factor: the generic check says what is wrong
    factor = float(ratios.mean())
    if abs(factor * (1 - p) - 1) < 1e-2:  # a wrong reading of p is off by far more
        return
    said = (
        tag("dropout-no-rescale", "the kept weights are not rescaled at all")
        if abs(factor - 1) < 1e-2
        else tag(
            "dropout-keep-prob",
            f"the kept weights are divided by p = {p}: p is read as the probability of "
            "keeping a weight",
        )
        if abs(factor * p - 1) < 1e-2
        else None
    )
    fail(
        f"{what}: with dropout={p} the kept attention weights are multiplied by {factor:.4g}, expected "
        f"1 / (1 - p) = {1 / (1 - p):.4g}" + (f"\n  {said}" if said else "")
    )


def expect_repeatable(first: torch.Tensor, second: torch.Tensor, *, what: str) -> None:
    """Two calls with the same inputs in eval mode (or with training=False) must agree: a difference
    is something random acting outside training (dropout left on)."""
    __tracebackhide__ = True
    if tuple(first.shape) == tuple(second.shape) and not torch.equal(first, second):
        fail(
            f"{what}: two calls with the same inputs give different results\n  "
            + tag(
                "dropout-in-eval",
                "something random acts outside training: dropout left on in eval mode "
                "(F.dropout(..., training=True), or dropout_p passed whatever `training` says)",
            )
        )


def returned_before_dropout(
    eval_weights: torch.Tensor, returned: torch.Tensor, p: float | None = None
) -> Suspects:
    """The suspects of a training-mode output that is not ``returned @ value``: dropout applied to
    that product instead of the weights (with ``p``, the dropout probability), or weights returned
    as they were before dropout (the returned ones equal the eval-mode weights)."""

    def observe(got: torch.Tensor, expected: torch.Tensor) -> str | None:
        same = returned.shape == eval_weights.shape and torch.allclose(
            returned.double(), eval_weights.double(), atol=1e-6
        )
        differs = not close(
            got, expected, 0.0, 0.0
        )  # the output was not made from the weights returned
        return (
            "the weights you return are the ones before dropout, the output used the dropped ones"
            if same and differs
            else None
        )

    dropped = () if p is None else (Detector("dropout-wrong-place", _output_dropped(p)),)
    return Suspects((*dropped, Detector("weights-before-dropout", observe)))


def _output_dropped(p: float) -> Callable[[torch.Tensor, torch.Tensor], str | None]:
    """Every entry of the output either 0 or ``expected / (1 - p)``, some zeroed where ``expected``
    is not: dropout on the output itself."""

    def observe(got: torch.Tensor, expected: torch.Tensor) -> str | None:
        if got.shape != expected.shape or not got.is_floating_point():
            return None
        g, e = got.double(), expected.double() / (1 - p)
        zero, kept = g.abs() <= 1e-6, (g - e).abs() <= 1e-4 * (1 + e.abs())
        dropped = zero & (e.abs() > 1e-3)
        if not bool((zero | kept).all()) or not bool(dropped.any()):
            return None
        return (
            f"your output is returned_weights @ value with dropout applied to it ({int(dropped.sum())} of "
            f"{g.numel()} entries zeroed, the rest times 1/(1 - p)): dropout belongs on the attention "
            "weights, after the softmax"
        )

    return observe
