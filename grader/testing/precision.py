"""Half-precision outputs judged against the reference kernel's own error, not a fixed tolerance.

A fixed tolerance (1e-2 for fp16, 2e-2 for bf16) accepts an implementation that accumulates in half
precision, whose errors against a float64 truth are 2-8 times those of a kernel that accumulates in
float32 and rounds once. So the student's error is bounded by a small factor of the reference
kernel's, both measured against the float64 truth of the same (half-precision) inputs: the mean
error separates the two cleanly (about 1x against about 2.7x on CPU, fp16 and bf16); the max error
guards the tails.
"""

from __future__ import annotations

import torch

from grader.testing.checks import expect, expect_finite, expect_shape

__all__ = ["MAX_FACTOR", "MEAN_FACTOR", "errors", "expect_no_worse_than"]

MEAN_FACTOR = 1.75  # a float32-accumulating implementation sits at ~1.0x the kernel's mean error
MAX_FACTOR = 3.0


def errors(got: torch.Tensor, truth: torch.Tensor) -> tuple[float, float]:
    """(mean, max) absolute error of ``got`` against the float64 ``truth``, on the CPU (a student's
    reply comes back from the sandbox on the CPU while the kernel and the truth may sit on a
    GPU)."""
    e = (got.detach().double().cpu() - truth.detach().double().cpu()).abs()
    return float(e.mean()), float(e.max())


def expect_no_worse_than(
    got: torch.Tensor,
    kernel: torch.Tensor,
    truth: torch.Tensor,
    *,
    what: str,
    hint: str | None = None,
) -> None:
    """Fail unless ``got`` (same dtype as ``kernel``) is about as close to ``truth`` as the kernel
    is."""
    __tracebackhide__ = True
    expect_shape(got, tuple(kernel.shape), what=what, hint=hint)
    expect(
        got.dtype == kernel.dtype, f"{what}: got dtype {got.dtype}, expected {kernel.dtype}", hint
    )
    expect_finite(got, what=what, hint=hint)
    (mean, worst), (k_mean, k_worst) = errors(got, truth), errors(kernel, truth)
    floor = float(torch.finfo(kernel.dtype).eps) * 1e-3  # a kernel that happens to be exact
    expect(
        mean <= MEAN_FACTOR * k_mean + floor and worst <= MAX_FACTOR * k_worst + floor,
        f"{what}: mean error {mean:.3g} (max {worst:.3g}) against a float64 computation, expected at most "
        f"{MEAN_FACTOR:g}x the reference kernel's mean error {k_mean:.3g} (max {MAX_FACTOR:g}x {k_worst:.3g})",
        hint
        or "accumulate in float32 (scores, softmax sums, the weighted values) and cast to the input dtype "
        "once at the end",
    )
