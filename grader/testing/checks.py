"""Assertions with feedback in a fixed order: missing → type → shape → dtype → values.

Every failure says "got …, expected …" and may add a hint that tells the student what to try.
These run in the trusted process on plain values the ``student`` proxy returned.
"""

from __future__ import annotations

from typing import Any, NoReturn

import pytest
import torch

TOLERANCES = {  # (atol, rtol) per dtype for CPU comparisons
    torch.float64: (1e-10, 1e-7),
    torch.float32: (1e-5, 1e-4),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (2e-2, 2e-2),
}


def fail(message: str, hint: str | None = None) -> NoReturn:
    __tracebackhide__ = True
    pytest.fail(message + (f"\n  hint: {hint}" if hint else ""), pytrace=False)


def expect(condition: bool, message: str, hint: str | None = None) -> None:
    """Fail with ``message`` (and ``hint``) unless ``condition``; ``condition`` must be a real bool."""
    __tracebackhide__ = True
    if type(condition) is not bool:
        raise TypeError(f"expect() needs a bool, got {type(condition).__name__} (a test bug)")
    if not condition:
        fail(message, hint)


def expect_tensor(got: Any, expected: torch.Tensor, *, what: str = "output", hint: str | None = None,
                  atol: float | None = None, rtol: float | None = None, check_dtype: bool = True) -> None:
    """Compare a student value with an expected tensor, reporting the first kind of difference."""
    __tracebackhide__ = True
    expect_shape(got, tuple(expected.shape), what=what, hint=hint)
    if check_dtype and got.dtype != expected.dtype:
        fail(f"{what}: got dtype {got.dtype}, expected {expected.dtype}", hint)
    default_atol, default_rtol = TOLERANCES.get(expected.dtype, (0.0, 0.0))
    _expect_values(got, expected, what, hint, default_atol if atol is None else atol,
                   default_rtol if rtol is None else rtol)


def expect_shape(got: Any, shape: tuple[int, ...], *, what: str = "output", hint: str | None = None) -> None:
    """Missing → type → shape, for a value that must be a tensor of ``shape``."""
    __tracebackhide__ = True
    if got is None:
        fail(f"{what}: got None, expected a tensor of shape {shape}", hint or "did you forget to return it?")
    if type(got) is not torch.Tensor:
        fail(f"{what}: got {type(got).__name__}, expected a torch.Tensor of shape {shape}", hint)
    if tuple(got.shape) != tuple(shape):
        fail(f"{what}: got shape {tuple(got.shape)}, expected {tuple(shape)}", hint)


def expect_finite(got: torch.Tensor, *, what: str = "output", hint: str | None = None) -> None:
    __tracebackhide__ = True
    bad = int((~torch.isfinite(got)).sum())
    if bad:
        fail(f"{what}: got {bad} NaN/inf value(s) of {got.numel()}, expected all finite", hint)


def _expect_values(got: torch.Tensor, expected: torch.Tensor, what: str, hint: str | None,
                   atol: float, rtol: float) -> None:
    __tracebackhide__ = True
    try:
        # a sandboxed reply always arrives on CPU: compare where the values are, not where they ran
        torch.testing.assert_close(got, expected, atol=atol, rtol=rtol, check_dtype=False, check_device=False)
    except AssertionError as exc:
        detail = " ".join(line.strip() for line in str(exc).splitlines()[1:4])
        fail(f"{what}: values differ from the expected ones: {detail}\n  got      {_preview(got)}\n"
             f"  expected {_preview(expected)}", hint)


def _preview(t: torch.Tensor, n: int = 6) -> str:
    flat = t.detach().reshape(-1)[:n].tolist()
    more = ", …" if t.numel() > n else ""
    return "[" + ", ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in flat) + more + "]"
