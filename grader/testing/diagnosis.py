"""Diagnosis: say which misconception a student's output shows, by computing the wrong answers on
the trusted side.

A test that compares a student's value with an expected one also hands the check its
:class:`Suspects`: the misconceptions students have for that computation
(:mod:`grader.testing.misconceptions`), each as a trusted wrong variant (:class:`Variant`: what the
output would be with that one mistake, computed here on the same inputs the test sent) or a detector
(:class:`Detector`: a property of the output that shows the mistake, such as float32-sized errors in
a float64 result). When the check fails, the suspects are tried in order: a variant whose output the
student's matches (and the expected one does not) names its misconception; so does a variant that
raises the very exception the student's code raised (:func:`watching`). The message then says so
plainly, ``diagnosis [id]: your output equals ...``. When none matches, the message says what
differs and which :class:`Fact` holds or not, and names no mistake: a hint for a mistake the student
did not make misleads.

Nothing here runs student code: a variant is trusted code evaluated on the inputs, and the student's
side is the plain value (or the exception type and message) that came back over the wire.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from grader.protocol.errors import StudentError

TAG = "diagnosis [{id}]: "  # how every diagnosis begins (misconceptions.TAG reads it)
MATCH_TOLERANCE = (1e-5, 1e-4)  # at least float32's: the variants are computed in float64


@dataclass(frozen=True)
class Variant:
    """One misconception as trusted code: ``compute()`` gives what the output would be with that
    mistake; ``also``: other misconceptions that give exactly the same output (the diagnosis names
    them all)."""

    id: str
    shows: (
        str  # completes "your output equals ...": "attention with the scores divided by 4 (d_out)"
    )
    compute: Callable[[], Any]
    also: tuple[str, ...] = ()

    @property
    def ids(self) -> str:
        return ", ".join((self.id, *self.also))


# what a detector saw: text, (misconception id, text), or nothing
Observation = str | tuple[str, str] | None


@dataclass(frozen=True)
class Detector:
    """One misconception as a property of the output: ``observe(got, expected)`` says what it saw,
    or None.

    A detector that reads which of several mistakes the output shows (a mask's band, a fitted scale)
    returns the id it found with its text; ``id`` then only names the detector. A ``last`` detector
    (a search, such as the fitted scale's ~21 runs) is tried after every other suspect, wherever it
    was composed: a variant foreseen for the same output is cheaper and names the mistake more
    precisely."""

    id: str
    observe: Callable[[torch.Tensor, torch.Tensor], Observation]
    last: bool = False


@dataclass(frozen=True)
class Fact:
    """A property the right output has, reported (holds or not) when no suspect matches."""

    says: str
    holds: Callable[[torch.Tensor], bool]


@dataclass(frozen=True)
class Suspects:
    """What a check tries when a student's value is wrong: variants and detectors in order, then
    facts."""

    items: tuple[Variant | Detector, ...] = ()
    facts: tuple[Fact, ...] = field(default=())

    def __add__(self, other: Suspects) -> Suspects:
        return Suspects(self.items + other.items, self.facts + other.facts)

    def explain(self, got: Any, expected: torch.Tensor, atol: float, rtol: float) -> str:
        """The lines to add to a failed check of ``got`` (a diagnosis, else the facts), each
        starting with a newline; empty when there is nothing to say."""
        for item in sorted(self.items, key=_is_last):  # stable: composed order otherwise
            said = _try(item, got, expected, atol, rtol)
            if said:
                return "\n  " + said
        return _facts(self.facts, got)

    def explain_error(self, error: StudentError) -> str | None:
        """A diagnosis for an exception the student's code raised: a variant raising the same
        one."""
        for item in self.items:
            if isinstance(item, Variant) and _raises_the_same(item, error):
                return tag(
                    item.ids, f"your code raises the same error as {item.shows} on these inputs"
                )
        return None


def _is_last(item: Variant | Detector) -> bool:
    return isinstance(item, Detector) and item.last


def tag(mid: str, text: str) -> str:
    return TAG.format(id=mid) + text


def _try(
    item: Variant | Detector, got: Any, expected: torch.Tensor, atol: float, rtol: float
) -> str | None:
    if type(got) is not torch.Tensor:
        return None
    if isinstance(item, Detector):
        seen = item.observe(got, expected)
        if isinstance(seen, tuple):
            return tag(*seen)
        return tag(item.id, seen) if seen else None
    wrong = _evaluate(item)
    if (
        type(wrong) is not torch.Tensor
        or close(wrong, expected, atol, rtol)
        or not close(got, wrong, atol, rtol)
    ):
        # raises, cannot be told from the right answer on these inputs, or not what the student did
        return None
    return tag(item.ids, f"your output equals {item.shows}")


def _evaluate(variant: Variant) -> Any:
    try:
        return variant.compute()
    except Exception as exc:  # noqa: BLE001 - a variant that raises is compared with the student's exception
        return exc


def close(a: torch.Tensor, b: torch.Tensor, atol: float, rtol: float) -> bool:
    """Same shape and values within the looser of (atol, rtol) and :data:`MATCH_TOLERANCE` (NaN
    equals NaN, inf equals inf: a variant that overflows matches a student's output that overflows
    the same way)."""
    if tuple(a.shape) != tuple(b.shape):
        return False
    x, y = a.detach().cpu(), b.detach().cpu()
    if x.dtype == torch.bool or y.dtype == torch.bool:
        return bool(torch.equal(x.bool(), y.bool())) and x.dtype == y.dtype
    x, y = x.to(torch.float64), y.to(torch.float64)
    return bool(
        torch.isclose(
            x,
            y,
            atol=max(atol, MATCH_TOLERANCE[0]),
            rtol=max(rtol, MATCH_TOLERANCE[1]),
            equal_nan=True,
        ).all()
    )


def _raises_the_same(variant: Variant, error: StudentError) -> bool:
    wrong = _evaluate(variant)
    if not isinstance(wrong, Exception) or type(wrong).__name__ != error.exc_type:
        return False
    # the worker qualifies the message with the student's function
    text = str(wrong).split("\n")[0].strip()
    return bool(text) and error.message.split("\n")[0].endswith(text)


def _facts(facts: Sequence[Fact], got: Any) -> str:
    if not facts or type(got) is not torch.Tensor:
        return ""
    verdicts = []
    for fact in facts:
        try:
            verdicts.append(f"{fact.says}: {'yes' if fact.holds(got) else 'no'}")
        except Exception:  # noqa: BLE001 - a fact that cannot be judged on this output is left out
            continue
    return "\n  what holds: " + "; ".join(verdicts) if verdicts else ""


@contextlib.contextmanager
def watching(suspects: Suspects | None) -> Iterator[None]:
    """Student code that raises inside the block is explained by ``suspects`` if a variant raises
    the same."""
    try:
        yield
    except StudentError as exc:
        said = suspects.explain_error(exc) if suspects is not None else None
        if said:
            # a trusted-side object, made by the backend from the worker's reply
            exc.diagnosis = said
        raise


# Exceptions whose own text shows the misconception, whatever the test: (id, text in the message,
# what it shows).
TELLTALES: tuple[tuple[str, str, str], ...] = (
    ("inplace-input", "InputModified", "your code changed a tensor it was given, in place"),
    ("banned-api", "BannedAPIError", "your code calls a function this exercise bans"),
    (
        "inplace-autograd",
        "modified by an inplace operation",
        "an in-place operation changed a tensor autograd saved for the backward pass",
    ),
    (
        "no-gradient",
        "does not require grad and does not have a grad_fn",
        "the output is cut off from autograd (.detach(), .data, torch.no_grad() or a tensor rebuilt from values)",
    ),
    (
        "device-ignored, not-a-buffer",
        "is not on the expected device",
        "your code makes a tensor on another device than its "
        "inputs' (a tensor made without device=, or a plain attribute that .to() does not move)",
    ),
    (
        "device-ignored, not-a-buffer",
        "Expected all tensors to be on the same device",
        "your code makes a tensor on another "
        "device than its inputs' (a tensor made without device=, or a plain attribute that .to() does not move)",
    ),
    (
        "device-ignored",
        "Cannot copy out of meta tensor",
        "your code copies a tensor to the CPU (.cpu(), torch.as_tensor without device=) where it "
        "must stay on its inputs' device",
    ),
    (
        "dtype-ignored",
        "expected scalar type",
        "your code mixes dtypes: a tensor made in another dtype than its inputs' "
        "(a float32 mask or constant) meets them",
    ),
    (
        "noncontiguous-view",
        "view size is not compatible with input tensor's size and stride",
        "your code calls "
        ".view() on a tensor that is not contiguous (a transposed or sliced input, as a model passes them): use "
        ".reshape(), which copies only when it must",
    ),
    (
        "mask-truthiness",
        "Boolean value of Tensor with more than one value is ambiguous",
        "`if tensor:` on a tensor of several values (`if mask:` where a test against None was meant)",
    ),
    (
        "function-grad-count",
        "returned an incorrect number of gradients",
        "backward returns fewer gradients than forward takes inputs (None for each non-tensor one)",
    ),
)


def _float32_sized(got: torch.Tensor, expected: torch.Tensor) -> str | None:
    """A float64 result wrong by no more than float32's rounding: some step ran in float32."""
    if expected.dtype != torch.float64 or got.dtype != torch.float64 or got.shape != expected.shape:
        return None
    err = float((got - expected).abs().nan_to_num(float("inf")).max()) if got.numel() else 0.0
    if not 0.0 < err <= 1e-5 * max(float(expected.abs().max()), 1.0):
        return None
    return (
        f"your float64 result is off by at most {err:.2g}: float32's precision, not float64's (a step computed "
        "in float32: a .float(), a float32 tensor or constant, a cast and back)"
    )


PRECISION = Suspects(
    (Detector("precision-lowered", _float32_sized),)
)  # every float64 check tries it last


def diagnosis_of(error: StudentError) -> str | None:
    """The diagnosis of a student's exception: a variant that raised the same (:func:`watching`),
    else the exception's own telltale text."""
    found = getattr(error, "diagnosis", None)
    if isinstance(found, str):
        return found
    text = f"{error.exc_type}: {error.message}"
    return next((tag(mid, says) for mid, telltale, says in TELLTALES if telltale in text), None)


NO_SUSPECTS = Suspects()
