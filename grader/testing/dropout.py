"""Dropout as behaviour: the student's own random draw, recovered from what it returned, then
checked.

:func:`grader.testing.oracles.expect_dropout_on_weights` says whether an output is ``(keep * weights
/ (1 - p)) @ values`` (one draw per batch item and head included); here the draw ``keep`` itself is
read back (:func:`drawn_multipliers`) so that a test can ask what only the draw shows: a fresh draw
per call (:func:`expect_new_draw`) and a backward through it. For the backward the reference
module's ``nn.Dropout`` is replaced by :class:`FixedDropout`, which multiplies by the student's
draw: the float64 reference then computes the very output and gradients the student's module must
give, whatever the draw was.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from grader.testing.checks import fail
from grader.testing.diagnosis import Detector, tag
from grader.testing.oracles import value_coefficients


class FixedDropout(nn.Module):
    """A reference module's dropout that multiplies by a given draw (0 or 1 / (1 - p) per attention
    weight)."""

    def __init__(self, multipliers: torch.Tensor) -> None:
        super().__init__()
        self.multipliers = multipliers

    def forward(self, weights: torch.Tensor) -> torch.Tensor:
        return weights * self.multipliers.to(weights.dtype)


def attention_with_draw(
    keep: torch.Tensor, mask: torch.Tensor | None = None
) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """``(output, weights)`` of attention (scale 1 / sqrt(E), a bool ``mask``: True = may attend)
    whose dropout is the draw ``keep``: the oracle of a function's training-mode backward, in the
    inputs' dtype (float64)."""

    def attend(
        q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        scores = scores if mask is None else scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1) * keep
        return weights @ v, weights

    return attend


def drawn_multipliers(coefficients: torch.Tensor, weights: torch.Tensor, p: float) -> torch.Tensor:
    """The draw behind ``coefficients`` (each weight's share of the output, float64): ``1 / (1 -
    p)`` where the weight was kept, 0 where it was dropped or is 0 anyway. Call it after
    ``expect_dropout_on_weights`` passed: each share is then 0 or ``weight / (1 - p)``, and half way
    between them tells them apart."""
    scaled = weights.double() / (1 - p)
    kept = (
        coefficients.double() - scaled
    ).abs() < coefficients.double().abs()  # nearer weight / (1 - p) than 0
    return kept.double() / (1 - p)


def output_multipliers(
    out: torch.Tensor, weights: torch.Tensor, values: torch.Tensor, p: float
) -> torch.Tensor:
    """:func:`drawn_multipliers` of an output ``(keep * weights / (1 - p)) @ values`` (independent
    value rows)."""
    return drawn_multipliers(value_coefficients(out, values), weights, p)


def expect_new_draw(first: torch.Tensor, second: torch.Tensor, *, what: str) -> None:
    """Two training-mode calls on the same inputs must draw afresh: equal outputs mean one fixed
    draw."""
    __tracebackhide__ = True
    if tuple(first.shape) == tuple(second.shape) and torch.equal(first, second):
        fail(
            f"{what}: two training-mode calls with the same inputs give identical results, expected a fresh "
            "dropout draw each time\n  "
            + tag(
                "dropout-same-draw",
                "every call drops the same weights: the dropout mask comes from a fixed seed "
                "or generator (torch.manual_seed, torch.Generator().manual_seed) or is drawn once and kept",
            )
        )


def eval_dropout(
    attention: Callable[[], tuple[torch.Tensor, torch.Tensor]], most_keys: int = 10
) -> Detector:
    """``dropout-in-eval`` for an eval-mode output: each row of it is ``(keep * weights) @ values``
    times one factor c > 1 (1 / (1 - p)) for some draw ``keep`` that drops at least one weight
    somewhere. ``attention()`` gives the right (weights (..., L, S), values (..., S, E)); rows with
    more than ``most_keys`` keys are not tried."""

    def observe(got: torch.Tensor, expected: torch.Tensor) -> str | None:
        weights, values = attention()
        if got.shape != expected.shape or got.shape[:-1] != weights.shape[:-1]:
            return None
        L, S = weights.shape[-2:]
        per_item = values.reshape(-1, S, values.shape[-1])
        rows = zip(weights.reshape(-1, S), got.double().reshape(-1, got.shape[-1]))
        fits = [_row_draw(w, per_item[i // L], g, most_keys) for i, (w, g) in enumerate(rows)]
        factors = [c for c, _ in fits if c is not None and c > 0]
        if any(c is None for c, _ in fits) or not factors or not any(d for _, d in fits):
            return None
        c = sum(factors) / len(factors)
        if c < 1.001 or max(abs(f - c) for f in factors) > 1e-3 * c:
            return None
        return (
            f"each output row is (weights with some dropped, the rest times {c:.4g} = 1 / (1 - {1 - 1 / c:.2g})) "
            "@ values: dropout acts in eval mode (F.dropout without training=self.training)"
        )

    return Detector("dropout-in-eval", observe)


def _row_draw(
    w: torch.Tensor, values: torch.Tensor, got: torch.Tensor, most_keys: int
) -> tuple[float | None, bool]:
    """(the factor c, whether a weight was dropped) of the draw whose ``c * (keep * w) @ values`` is
    ``got``; (None, False) when none is; c = 0 for a row that is all zero (every weight dropped)."""
    keys = torch.nonzero(w > 0).flatten()
    if keys.numel() > most_keys:
        return None, False
    n = keys.numel()
    draws = (
        (torch.arange(2**n)[:, None] >> torch.arange(n)) & 1
    ).double()  # (2^n, n): every keep pattern
    parts = draws @ (w[keys, None] * values[keys].double())  # (2^n, E)
    norms = (parts * parts).sum(-1)
    c = (parts @ got) / norms.clamp(min=1e-300)
    ok = ((c[:, None] * parts - got).abs() <= 1e-4 + 1e-3 * got.abs()).all(-1)
    if not bool(ok.any()):
        return None, False
    best = int(
        (draws.sum(-1) - 2 * n * (~ok).double()).argmax()
    )  # the fitting draw that keeps the most
    return (float(c[best]) if float(norms[best]) > 0 else 0.0), bool(draws[best].sum() < n)
