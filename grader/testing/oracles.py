"""Oracles shared by the hidden suites: what dropout on the attention weights must look like.

A module in training mode returns ``out = (keep * weights / (1 - p)) @ values`` (then maybe a linear map the
test can undo), with ``keep`` a random 0/1 mask. The test knows ``weights`` and ``values`` (float64 hand
computations) but not ``keep``; when the value rows are linearly independent (S <= Ev), the coefficient of
each value row in ``out`` is recovered exactly by a least-squares solve, and must be either 0 (dropped) or
``weights / (1 - p)`` (kept). Dropout anywhere else (on the scores, the values, the output) or with the
wrong scale gives coefficients of neither kind, whatever ``p`` is.
"""

from __future__ import annotations

import torch

from grader.testing.checks import expect, expect_finite, expect_shape


def value_coefficients(out: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """``c`` with ``out == c @ values``: (..., L, Ev) and (..., S, Ev) -> (..., L, S), in float64."""
    v = values.double()
    # least squares through the normal equations: (c V)(V^T) = out V^T, with V V^T (S x S) invertible
    solved: torch.Tensor = torch.linalg.solve(v @ v.transpose(-2, -1), v @ out.double().transpose(-2, -1))
    return solved.transpose(-2, -1)


def expect_dropout_on_weights(out: torch.Tensor, weights: torch.Tensor, values: torch.Tensor, p: float, *,
                              what: str, tol: float = 1e-6) -> None:
    """Fail unless ``out`` is ``(keep * weights / (1 - p)) @ values`` with about a fraction ``p`` dropped."""
    __tracebackhide__ = True
    expect_shape(out, tuple(weights.shape[:-1]) + (values.shape[-1],), what=what)
    expect_finite(out, what=what, hint="dropout acts on the weights after the softmax, never on -inf scores")
    coeff, scaled = value_coefficients(out, values), weights.double() / (1 - p)
    # the solve amplifies rounding by the condition number of the value rows: widen the tolerance by it
    slack = tol * torch.linalg.cond(values.double()).clamp(min=1.0)[..., None, None] * (1 + scaled.abs())
    dropped, kept = coeff.abs() <= slack, (coeff - scaled).abs() <= slack
    live = scaled.abs() > 1e-3  # weights clearly non-zero: there, dropped and kept are told apart
    _expect_the_right_scale(coeff, weights, live & ~dropped, p, what)
    stray = ~(dropped | kept)
    if bool(stray.any()):
        index = tuple(int(i) for i in torch.nonzero(stray)[0])
        expect(False, f"{what}: in training mode with dropout={p}, the output is not (dropped-out weights) @ values: "
               f"an attention weight of {float(weights[index]):.4g} counts {float(coeff[index]):.4g} times its value "
               f"row, expected 0 (dropped) or weight / (1 - p) = {float(scaled[index]):.4g} (kept)",
               "dropout must act on the attention WEIGHTS (after the softmax), not on the scores, the values or the "
               "output; nn.Dropout(p) zeroes with probability p and scales the kept weights by 1 / (1 - p)")
    n = max(int(live.sum()), 1)
    frac = float((dropped & live).sum()) / n
    expect(abs(frac - p) <= max(0.05, 5 * (p * (1 - p) / n) ** 0.5),  # 5 sigma: a fair draw never fails
           f"{what}: got {frac:.1%} of the attention weights dropped with dropout={p}, expected about {p:.0%}",
           "p is the probability of DROPPING a weight (not of keeping it): nn.Dropout(p), F.dropout(w, p)")


def _expect_the_right_scale(coeff: torch.Tensor, weights: torch.Tensor, survivors: torch.Tensor, p: float,
                            what: str) -> None:
    """Survivors all scaled by one wrong factor: the drop probability was read as a keep probability."""
    __tracebackhide__ = True
    ratios = (coeff / weights.double())[survivors]
    if ratios.numel() < 2 or float(ratios.max() - ratios.min()) > 1e-4 * float(ratios.abs().max()):
        return  # no single factor: the generic check says what is wrong
    factor = float(ratios.mean())
    expect(abs(factor * (1 - p) - 1) < 1e-2,  # a wrong reading of p is off by far more
           f"{what}: with dropout={p} the kept attention weights are multiplied by {factor:.4g}, expected "
           f"1 / (1 - p) = {1 / (1 - p):.4g}",
           "p is the probability of DROPPING a weight (nn.Dropout(p), F.dropout(w, p)): keep with probability "
           "1 - p and scale the kept weights by 1 / (1 - p)")
