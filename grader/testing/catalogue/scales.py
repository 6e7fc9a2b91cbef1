"""A wrong scale, found by fitting it: whatever factor the student's scores were multiplied by.

Scaling by the wrong factor is one misconception with many spellings (no scale, 1/head_dim,
1/sqrt(d_model), the kv width, the scale applied twice, sqrt instead of 1/sqrt); a list of variants
names only the spellings foreseen. :func:`scale_detector` instead searches the one factor ``c`` for
which the right computation with its scores times ``c`` gives the student's output, and names the
wrong scale only when that output matches within the check's tolerance: the diagnosis is an
observation, with the factor it found in numbers (and in words when it equals a formula of the
exercise's sizes).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping

import torch

from grader.testing.diagnosis import Detector, Observation, close

GRID = [2.0 ** (k / 2) for k in range(-10, 11) if k]  # times the right scale: 1/32 .. 32 first
GOLDEN = (math.sqrt(5) - 1) / 2
MAX_WORK = 1 << 20  # scores per run: ~50 runs of a million scores stay well under a second
# steps after which a search not closing in on the output stops (a wrong answer, no scale)
PROBE = 8
STEPS = 26  # golden-section steps on the log of the factor: the bracket shrinks 0.618**26 ~ 3.7e-6


def scale_detector(
    run: Callable[[float], torch.Tensor], right: float, sizes: Mapping[str, int], work: int = 0
) -> Detector:
    """A detector that fits the scale: ``run(c)`` is the right computation with its scores times
    ``c`` (the right scale is ``right``); ``sizes`` names the exercise's dimensions ("head_dim": 8,
    ...) for the message; ``work``: how many scores one run computes (a check on long sequences is
    not fitted: see MAX_WORK)."""

    def observe(got: torch.Tensor, expected: torch.Tensor) -> Observation:
        if got.shape != expected.shape or not got.is_floating_point() or work > MAX_WORK:
            return None
        fitted = _fit(run, got, right)
        if fitted is None or abs(math.log(fitted / right)) < 1e-3:
            return None
        factor = _snapped(fitted, sizes)
        wrong = run(factor)
        if not close(got, wrong, 0.0, 0.0) or close(wrong, expected, 0.0, 0.0):
            return None
        return "wrong-scale", (
            f"your output equals this computation with the scores scaled by {_named(factor, sizes)} "
            f"instead of {_named(right, sizes)}"
        )

    return Detector("wrong-scale", observe, last=True)


def _fit(run: Callable[[float], torch.Tensor], got: torch.Tensor, right: float) -> float | None:
    """The factor whose output is nearest ``got``: the best of a grid, then a golden-section search
    around it."""
    target = got.detach().to(torch.float64)

    @functools.cache
    def error(log_c: float) -> float:
        try:
            diff = (run(math.exp(log_c)).to(torch.float64) - target).abs().max()
        except Exception:  # noqa: BLE001 - a factor the computation cannot take is simply not it
            return math.inf
        value = float(diff)
        return value if math.isfinite(value) else math.inf

    logs = [math.log(right * g) for g in GRID] + [0.0]  # 0.0: no scale at all
    # the right scale itself stays a start: a factor near 1 is refined from it
    best = min(logs, key=error)
    if not math.isfinite(error(best)):
        return None  # NaN or inf where no factor gives them: another mistake
    lo, hi = best - math.log(2) / 2, best + math.log(2) / 2
    a, b = hi - GOLDEN * (hi - lo), lo + GOLDEN * (hi - lo)
    fa, fb = error(a), error(b)
    for step in range(STEPS):  # each step reuses one of the two inner points: one run per step
        if step == PROBE and min(fa, fb) > 0.2 * error(math.log(right)):
            return None  # not closing in on the student's output: no factor reproduces it
        if fa <= fb:
            hi, b, fb = b, a, fa
            a = hi - GOLDEN * (hi - lo)
            fa = error(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + GOLDEN * (hi - lo)
            fb = error(b)
    return math.exp(a if fa <= fb else b)


def _forms(sizes: Mapping[str, int]) -> dict[str, float]:
    """The scales a student writes from the exercise's sizes, by their formula."""
    forms: dict[str, float] = {"1 (no scale)": 1.0}
    for name, n in sizes.items():
        forms |= {
            f"1/sqrt({name}) = 1/sqrt({n})": 1 / math.sqrt(n),
            f"1/{name} = 1/{n}": 1 / n,
            f"sqrt({name}) = sqrt({n})": math.sqrt(n),
        }
    return forms


def _snapped(factor: float, sizes: Mapping[str, int]) -> float:
    """The formula's exact value when the fitted ``factor`` is one (the fit is good to ~1e-6), else
    ``factor``."""
    return next((v for v in _forms(sizes).values() if abs(math.log(factor / v)) < 1e-3), factor)


def _named(factor: float, sizes: Mapping[str, int]) -> str:
    """``factor`` in numbers, with the formula of ``sizes`` it equals (1/sqrt(head_dim), 1/d_model,
    ...)."""
    for words, value in _forms(sizes).items():
        if abs(math.log(factor / value)) < 1e-3:
            return f"{words} = {value:.4g}"
    return f"{factor:.4g}"
