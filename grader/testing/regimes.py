"""Large-score inputs whose verdict does not depend on the draw: every score shifted by one large
constant.

A softmax without the row max subtracted overflows (float32's ``exp`` is inf above 88.7) or
underflows to 0 / 0 on such scores, on every draw; the softmax itself ignores a constant shift, so
its weights stay as far from one-hot as for ordinary inputs. Scaling the inputs up (``x * 30``)
overflows a naive exp too, but it saturates the softmax: each row's weights become nearly one-hot,
and whether a wrong scale or a wrong bias still shows then depends on the seed. The same submission
could lose a test's points on one run and keep them on the next.

A severe test calls the student through :func:`expect_stable`: its failure caps the exercise only
when it is the overflow the test is for, which it confirms by running the same call on
ordinary-sized scores.

Shared by the hidden suites (and shippable: nothing here is an exercise's solution).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import torch

from grader.protocol.errors import StudentError
from grader.testing.checks import fail
from grader.testing.diagnosis import Suspects, tag
from grader.testing.misconceptions import TAG  # how a message names its ids

__all__ = [
    "SHIFT",
    "constant_last_feature",
    "expect_stable",
    "nonfinite",
    "shift_heads",
    "shift_linears",
    "shifted_qk",
    "unshifted",
]

T = TypeVar("T")

# well past 88.7 whatever a draw's own spread (a few units), and exact enough in float32
SHIFT = 150.0


def shifted_qk(
    q: torch.Tensor, k: torch.Tensor, shift: float = SHIFT, *, feature: int = -1
) -> tuple[torch.Tensor, torch.Tensor]:
    """Copies of ``q`` and ``k`` whose ``feature`` (the last by default; another where the last
    already carries a pattern of the test's own) is replaced by constants: ``q @ k^T / sqrt(E)`` is
    the other features' part plus ``shift`` (negative: minus), on every row and column."""
    a = math.sqrt(abs(shift) * math.sqrt(q.shape[-1]))
    q, k = q.clone(), k.clone()
    q[..., feature], k[..., feature] = a, math.copysign(a, shift)
    return q, k


@torch.no_grad()
def shift_heads(
    w_query: torch.Tensor,
    w_key: torch.Tensor,
    head_dim: int,
    shift: float = SHIFT,
    *,
    b_query: torch.Tensor | None = None,
    b_key: torch.Tensor | None = None,
) -> None:
    """Rewire query and key projection weights (``nn.Linear`` layout, out x in) in place: the
    input's last feature, held at 1 (:func:`constant_last_feature`), alone feeds the last coordinate
    of every head, with weight ``a``, and feeds nothing else. Every score of every head then gains
    ``a^2 / sqrt(head_dim) = shift`` (rotary embeddings leave it nearly so: the last coordinate
    rotates slowest)."""
    a = math.sqrt(shift * math.sqrt(head_dim))
    for weight, bias in ((w_query, b_query), (w_key, b_key)):
        rows = slice(head_dim - 1, None, head_dim)  # the last coordinate of each head
        weight[:, -1] = 0.0
        weight[rows, :] = 0.0
        weight[rows, -1] = a
        if bias is not None:
            bias[rows] = 0.0


def shift_linears(
    query: torch.nn.Linear, key: torch.nn.Linear, head_dim: int, shift: float = SHIFT
) -> None:
    """:func:`shift_heads` on a module's query and key layers (``W_query`` and ``W_key``), biases
    included."""
    shift_heads(query.weight, key.weight, head_dim, shift, b_query=query.bias, b_key=key.bias)


def unshifted(x: torch.Tensor) -> torch.Tensor:
    """A copy of ``x`` whose last feature is 0: through :func:`shift_heads`' weights, the same
    scores as for :func:`constant_last_feature`'s copy without the shift (the ordinary-sized twin of
    a large-score input)."""
    x = x.clone()
    x[..., -1] = 0.0
    return x


def constant_last_feature(x: torch.Tensor) -> torch.Tensor:
    """A copy of ``x`` whose last feature is 1 everywhere (the feature :func:`shift_heads` wires
    in)."""
    x = x.clone()
    x[..., -1] = 1.0
    return x


def expect_stable(
    large: Callable[[], T],
    ordinary: Callable[[], Any],
    *,
    what: str,
    names: str | None = None,
    suspects: tuple[Suspects, torch.Tensor] | None = None,
) -> T:
    """``large()`` (the student's call on large scores), failing the way that caps its exercise only
    when it is an overflow: it raises or gives inf/NaN while ``ordinary()``, the same call on
    ordinary-sized scores, runs and gives finite values. A call that breaks on ordinary scores too
    fails without the cap (its bug is not the one the cap names; other tests charge it); finite
    wrong values are for the test's own value checks, which never cap. ``names``: the diagnosis line
    of a confirmed break (default: a softmax without the max subtracted). ``suspects``: (the test's
    suspects, the right output): a NaN/inf output one of them reproduces is named by it, and caps
    only if it is the class ``names`` names (the max along another dim also breaks on large
    scores)."""
    __tracebackhide__ = True
    try:
        got = large()
    except StudentError as exc:
        if exc.kind != "exception":
            raise  # a timeout, a crash, a missing function: what it is, never the overflow
        _broke(
            f"raised {exc.exc_type}: {exc.message.splitlines()[0][:200]}",
            ordinary,
            what,
            names,
            exc,
        )
    bad = nonfinite(got)
    if bad:
        said = suspects[0].explain(got, suspects[1], 0.0, 0.0).strip() if suspects else ""
        _broke(f"got {bad} NaN/inf value(s)", ordinary, what, names, seen=said or None)
    return got


OVERFLOWS = tag(
    "softmax-no-max",
    "it overflows: an exp without the row's max subtracted first (exp is inf above 88.7 "
    "in float32)",
)


def _broke(
    observed: str,
    ordinary: Callable[[], Any],
    what: str,
    names: str | None,
    error: StudentError | None = None,
    *,
    seen: str | None = None,
) -> NoReturn:
    """``names``: the class the cap is for; ``seen``: the diagnosis of the very output, if a suspect
    reproduced it (another mistake that also breaks here, such as the max along another dim, is
    named and does not cap)."""
    __tracebackhide__ = True
    if _runs_finite(ordinary):
        cause = names or OVERFLOWS
        said = seen or cause
        fail(
            f"{what}: {observed} on these large scores, while the same call on ordinary-sized scores gives finite "
            f"values\n  {said}",
            caps=f"{observed} on large scores, finite values on ordinary ones"
            if _ids(said) & _ids(cause) or not _ids(cause)
            else None,
        )
    if error is not None:
        # the student's own exception, shown as it is: ordinary scores raise too, so no cap
        raise error
    fail(
        f"{what}: {observed} on these large scores, and on ordinary-sized scores too: not an overflow (this test's "
        "points only)"
    )


def _ids(line: str) -> set[str]:
    return {i for found in TAG.findall(line) for i in found.split(", ")}


def _runs_finite(call: Callable[[], Any]) -> bool:
    try:
        return nonfinite(call()) == 0
    except StudentError:
        return False


def nonfinite(value: Any) -> int:
    """How many NaN or inf values the tensors in ``value`` (nested in tuples, lists and dicts)
    hold."""
    if type(value) is torch.Tensor:
        return int((~torch.isfinite(value)).sum()) if value.is_floating_point() else 0
    if isinstance(value, (tuple, list)):
        return sum(nonfinite(v) for v in value)
    if isinstance(value, dict):
        return sum(nonfinite(v) for v in value.values())
    return 0
