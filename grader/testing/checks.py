"""Assertions with feedback in a fixed order: missing → type → shape → dtype → values.

Every failure says "got …, expected …" and may add a hint that tells the student what to try.
These run in the trusted process on plain values the ``student`` proxy returned.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

import pytest
import torch

from grader.protocol.errors import StudentError
from grader.testing.diagnosis import NO_SUSPECTS, PRECISION, Suspects, tag, watching
from grader.testing.mismatch import mismatch_preview, mismatch_summary

TOLERANCES = {  # (atol, rtol) per dtype for CPU comparisons
    torch.float64: (1e-10, 1e-7),
    torch.float32: (1e-5, 1e-4),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (2e-2, 2e-2),
}


_CAPS = "grader_caps"  # set on a failure of the class a severe test names: what was observed


def fail(message: str, hint: str | None = None, *, caps: str | None = None) -> NoReturn:
    """Fail the test. ``caps``: this failure is the one a ``severe`` test exists for (an overflow,
    confirmed by :func:`grader.testing.regimes.expect_stable`), and says what was observed; only
    such a failure caps."""
    __tracebackhide__ = True
    error = pytest.fail.Exception(message + (f"\n  hint: {hint}" if hint else ""), pytrace=False)
    setattr(error, _CAPS, caps)
    raise error


def caps_observed(error: BaseException) -> str | None:
    """What a failure of a severe test's own class observed (:func:`fail`'s ``caps``), else None:
    the cap of :func:`grader.scoring.points.cap` is for that class alone, never for an exception, a
    shape or wrong values."""
    observed = getattr(error, _CAPS, None)
    return observed if isinstance(observed, str) else None


@contextlib.contextmanager
def hinted(hint: str) -> Iterator[None]:
    """Student code that raises inside the block fails with ``hint`` (a neutral instruction the test
    needs followed, such as an import it relies on; never a guess at a mistake:
    :mod:`grader.testing.diagnosis`)."""
    try:
        yield
    except StudentError as exc:
        exc.hint = hint  # a trusted-side object, made by the backend from the worker's reply
        raise


def expect(condition: bool, message: str, hint: str | None = None) -> None:
    """Fail with ``message`` (and ``hint``) unless ``condition``; ``condition`` must be a real
    bool."""
    __tracebackhide__ = True
    if type(condition) is not bool:
        raise TypeError(f"expect() needs a bool, got {type(condition).__name__} (a test bug)")
    if not condition:
        fail(message, hint)


def expect_tensor(
    got: Any,
    expected: torch.Tensor,
    *,
    what: str = "output",
    hint: str | None = None,
    atol: float | None = None,
    rtol: float | None = None,
    check_dtype: bool = True,
    suspects: Suspects | None = None,
) -> None:
    """Compare a student value with an expected tensor, reporting the first kind of difference; on a
    failure, ``suspects`` say which misconception the value shows, if any
    (:mod:`grader.testing.diagnosis`)."""
    __tracebackhide__ = True
    default_atol, default_rtol = TOLERANCES.get(expected.dtype, (0.0, 0.0))
    atol, rtol = default_atol if atol is None else atol, default_rtol if rtol is None else rtol
    expect_shape(
        got, tuple(expected.shape), what=what, hint=hint, suspects=suspects, expected=expected
    )
    if check_dtype and got.dtype != expected.dtype:
        said = suspects.explain(got, expected, atol, rtol) if suspects else ""
        said = (
            said
            if _diagnosed(said)
            else "\n  "
            + tag(
                "dtype-ignored",
                f"your result comes back in {got.dtype} for a computation due in {expected.dtype}: a "
                "tensor made without dtype= (torch.zeros(...)), a constant or a cast of another dtype along the way",
            )
        )
        fail(f"{what}: got dtype {got.dtype}, expected {expected.dtype}{said}")
    _expect_values(got, expected, what, hint, atol, rtol, suspects)


def expect_call(
    call: Callable[[], Any],
    expected: torch.Tensor,
    *,
    what: str,
    suspects: Suspects | None = None,
    check_values: bool = True,
    **tolerances: Any,
) -> Any:
    """``call()`` (a student's), compared with ``expected`` by :func:`expect_tensor` (only its
    shape, without ``check_values``); an exception it raises is explained by ``suspects`` when one
    of their variants raises the same. Returns what it returned."""
    __tracebackhide__ = True
    with watching(suspects):
        got = call()
    if check_values:
        expect_tensor(got, expected, what=what, suspects=suspects, **tolerances)
    else:
        expect_shape(got, tuple(expected.shape), what=what, suspects=suspects, expected=expected)
    return got


def expect_tuple(
    call: Callable[[], Any], n: int, *, what: str, suspects: Suspects | None = None
) -> tuple[Any, ...]:
    """``call()`` (a student's), which must return a tuple of ``n`` values; an exception it raises
    is explained by ``suspects`` when one of their variants raises the same."""
    __tracebackhide__ = True
    with watching(suspects):
        got = call()
    expect(
        isinstance(got, tuple) and len(got) == n,
        f"{what}: got {type(got).__name__}"
        f"{f' of {len(got)}' if isinstance(got, tuple) else ''}, expected a tuple of {n}",
    )
    return tuple(got)


# an explicit refusal: what a student's own check raises (an assert, or a ValueError of theirs)
REFUSALS = ("ValueError", "AssertionError")


def unless_refused(call: Callable[[], Any]) -> tuple[bool, Any]:
    """``(refused, value)`` of ``call()``, for an input beyond what the docstring promises to take
    (4-D scores where it says (T, T) or (B, T, T)): a strict student may refuse it (a ValueError or
    an assert of theirs), which is no mistake; an answer must be right. Anything else raises."""
    try:
        return False, call()
    except StudentError as exc:
        if exc.exc_type in REFUSALS and exc.frames:  # raised in the student's own code
            return True, None
        raise


def expect_raises(call: Callable[[], Any], exc_type: str | None, *, what: str) -> StudentError:
    """``call()`` (a student's) must raise: ``exc_type`` (the type name the specification promises,
    such as "ValueError") or, where it promises none, any exception. Returns the student's error."""
    __tracebackhide__ = True
    try:
        call()
    except StudentError as exc:
        if exc.kind == "not_implemented":
            raise
        if exc_type is not None and exc.exc_type != exc_type:
            fail(
                f"{what}: raised {exc.exc_type or exc.kind} ({exc.message.splitlines()[0][:160]}), expected the "
                f"{exc_type} the specification promises\n  "
                + tag(
                    "error-unchecked",
                    f"the invalid input is not checked where it should be: raise {exc_type} "
                    "yourself before anything else fails on it",
                )
            )
        return exc
    fail(
        f"{what}: no error, expected {exc_type or 'an error'}\n  "
        + tag(
            "error-unchecked",
            f"an invalid input is accepted: check it and raise {exc_type or 'an error'}",
        )
    )


def at_the_limit(call: Callable[[], Any], *, what: str, limit: str) -> Any:
    """``call()`` (a student's) on an input exactly at a limit the specification allows (T ==
    max_len, a cache filled to max_len): a ValueError there is a length check off by one."""
    __tracebackhide__ = True
    try:
        return call()
    except StudentError as exc:
        if exc.exc_type != "ValueError":
            raise
        fail(
            f"{what} raised ValueError: {exc.message.splitlines()[0][:160]}\n  "
            + tag(
                "cache-off-by-one",
                f"{limit} is allowed: only more than that is refused (> where >= is written)",
            )
        )


def expect_shape(
    got: Any,
    shape: tuple[int, ...],
    *,
    what: str = "output",
    hint: str | None = None,
    suspects: Suspects | None = None,
    expected: torch.Tensor | None = None,
) -> None:
    """Missing → type → shape, for a value that must be a tensor of ``shape``."""
    __tracebackhide__ = True
    if got is None:
        fail(
            f"{what}: got None, expected a tensor of shape {shape}",
            hint or "did you forget to return it?",
        )
    if type(got) is not torch.Tensor:
        fail(f"{what}: got {type(got).__name__}, expected a torch.Tensor of shape {shape}", hint)
    if tuple(got.shape) != tuple(shape):
        said = (
            suspects.explain(got, expected, 0.0, 0.0) if suspects and expected is not None else ""
        )
        fail(
            f"{what}: got shape {tuple(got.shape)}, expected {tuple(shape)}{said}",
            None if _diagnosed(said) else hint,
        )


def expect_finite(got: torch.Tensor, *, what: str = "output", hint: str | None = None) -> None:
    __tracebackhide__ = True
    bad = int((~torch.isfinite(got)).sum())
    if bad:
        fail(f"{what}: got {bad} NaN/inf value(s) of {got.numel()}, expected all finite", hint)


def _expect_values(
    got: torch.Tensor,
    expected: torch.Tensor,
    what: str,
    hint: str | None,
    atol: float,
    rtol: float,
    suspects: Suspects | None = None,
) -> None:
    __tracebackhide__ = True
    detail = mismatch_summary(got, expected, atol, rtol)
    if detail:
        said = ((suspects or NO_SUSPECTS) + PRECISION).explain(got, expected, atol, rtol)
        fail(
            f"{what}: values differ from the expected ones: {detail}\n{mismatch_preview(got, expected, atol, rtol)}"
            f"{said}",
            None if _diagnosed(said) else hint,
        )


def _diagnosed(said: str) -> bool:
    """A diagnosis replaces the test's hint: it says what this output shows."""
    return "diagnosis [" in said
