"""The same wrong answer: a digest of what a student's code gave back in a test it failed, taken on
the trusted side.

Two submissions that fail the same hidden test with the same wrong values are evidence of a shared
solution even when their code differs (:mod:`grader.similarity.answers` groups them). The digest is
made here, in the trusted runner, from the plain values that came back over the wire
(:class:`Observing` wraps the backend the suites use): the student's worker never reports it, so it
cannot forge or hide one.

What it hashes, call after call in the test's order: each returned value's structure and, for a
floating tensor, its dtype, shape, where it is not finite and three statistics of its finite part
(mean, root mean square, and a projection on fixed pseudo-random weights) rounded to 3 significant
digits (2 for 16-bit floats). Copies whose torch calls differ but compute the same thing differ in
the last bits only, so they share a digest, and a different formula does not. Integer and boolean
tensors are hashed exactly. A module handle counts as "a handle", a student exception raised and
caught by the test as its type only: file names and line numbers would tell copies apart.

Comparable only between cards graded with the same seed: the hidden suites draw their inputs from it
(``grader batch --similarity`` grades a class on one seed). The digest keeps nothing secret: it is a
truncated hash of the student's own outputs (never of the expected ones, nor of the inputs), and the
exports students see leave it out.
"""

from __future__ import annotations

import array
import hashlib
from collections.abc import Generator
from typing import Any

import pytest
import torch

from grader.protocol.errors import StudentError
from grader.protocol.values import HandleRef

DIGEST_CHARS = 16  # 64 bits: no accidental collision in a class of thousands
PROPERTY = "wrong_answer"  # the report's user property, read by grader.scoring.collect


def _rounded(value: float, scale: float, digits: int) -> str:
    """``value`` to ``digits`` significant digits, 0 when it is noise next to ``scale``."""
    return "0" if abs(value) <= 1e-6 * scale else f"{value:.{digits}g}"


def _exact(t: torch.Tensor, code: str) -> bytes:
    """An integer tensor's values as bytes, without NumPy (not a dependency: ``Tensor.numpy()``
    raises without it)."""
    return array.array(code, t.contiguous().reshape(-1).tolist()).tobytes()


def _tensor_bytes(t: torch.Tensor) -> bytes:
    t = t.detach().cpu()
    head = f"T:{t.dtype}:{tuple(t.shape)}:".encode()
    if t.is_complex():
        t = torch.view_as_real(t)
    if not t.is_floating_point():
        return head + hashlib.sha256(_exact(t.to(torch.int64), "q")).digest()
    x = t.to(torch.float64).reshape(-1)
    finite = torch.isfinite(x)
    pattern = (
        b""
        if bool(finite.all())
        else hashlib.sha256(
            _exact(torch.isnan(x).to(torch.int8) + 2 * (x == float("inf")).to(torch.int8), "b")
        ).digest()
    )
    f = x[finite]
    if f.numel() == 0:
        return head + pattern
    weights = (
        torch.rand(f.numel(), generator=torch.Generator().manual_seed(0), dtype=torch.float64) - 0.5
    )
    stats = (f.mean(), f.square().mean().sqrt(), (f * weights).sum() / f.numel() ** 0.5)
    scale = float(f.abs().max())
    digits = 2 if t.element_size() == 2 else 3
    return head + pattern + ",".join(_rounded(float(s), scale, digits) for s in stats).encode()


def encode(value: object) -> bytes:
    """The bytes a returned value contributes to the digest (see the module docstring)."""
    if isinstance(value, torch.Tensor):
        return _tensor_bytes(value)
    if isinstance(value, float):
        return b"F:" + _rounded(value, abs(value), 3).encode()
    if isinstance(value, HandleRef):
        return b"H"
    if isinstance(value, (list, tuple)):
        return f"{type(value).__name__}[".encode() + b";".join(encode(v) for v in value) + b"]"
    if isinstance(value, dict):
        return b"{" + b";".join(encode(k) + b"=" + encode(v) for k, v in value.items()) + b"}"
    return (
        f"{type(value).__name__}:{value!r}".encode()
    )  # None, bool, int, str, dtype, device: exact


class Recorder:
    """One test's observed values (reset before each test), digested only when the test failed: a
    passing test, the usual case, pays for a list append per call instead of encoding every value it
    got back."""

    def __init__(self) -> None:
        self._seen: list[tuple[bool, object]] = []  # (already bytes, what was seen)

    def reset(self) -> None:
        self._seen = []

    def observe(self, value: object, *, raw: bool = False) -> None:
        self._seen.append((raw, value))

    def digest(self) -> str | None:
        """``None`` when the student's code gave back nothing in this test."""
        if not self._seen:
            return None
        digest = hashlib.sha256()
        for raw, value in self._seen:
            part = value if raw and isinstance(value, bytes) else encode(value)
            digest.update(len(part).to_bytes(8, "little") + part)
        return digest.hexdigest()[:DIGEST_CHARS]


class Observing:
    """A :class:`grader.student.proxy.Backend` that records every value (or student exception type)
    the wrapped backend gives back; anything else (``begin_test``, ``close``...) is the wrapped
    backend's own."""

    def __init__(self, backend: Any, recorder: Recorder) -> None:
        self._backend, self._recorder = backend, recorder

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)

    def _seen(self, method: str, *args: Any, **kwargs: Any) -> Any:
        try:
            value = getattr(self._backend, method)(*args, **kwargs)
        except StudentError as exc:
            self._recorder.observe(f"E:{exc.kind}:{exc.exc_type}".encode(), raw=True)
            raise
        self._recorder.observe(value[0] if method == "measure" else value)  # not measure's timings
        return value

    def call(self, *args: Any, **kwargs: Any) -> Any:
        return self._seen("call", *args, **kwargs)

    def method(self, *args: Any, **kwargs: Any) -> Any:
        return self._seen("method", *args, **kwargs)

    def measure(self, *args: Any, **kwargs: Any) -> Any:
        return self._seen("measure", *args, **kwargs)

    def grads(self, *args: Any, **kwargs: Any) -> Any:
        return self._seen("grads", *args, **kwargs)

    def meta(self, *args: Any, **kwargs: Any) -> Any:
        return self._seen("meta", *args, **kwargs)


class Answers:
    """The runner's plugin: a fresh :class:`Recorder` per test; a test that failed on the values the
    student's code gave back (not on a student exception, a timeout or a crash) gets the digest as
    its ``wrong_answer``."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        self.recorder.reset()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        error = call.excinfo.value if call.excinfo is not None else None
        if (
            call.when == "call"
            and report.failed
            and not isinstance(error, (StudentError, pytest.skip.Exception))
        ):
            digest = self.recorder.digest()
            if digest is not None:
                report.user_properties.append((PROPERTY, digest))
        return report
