"""Exceptions that carry what student code did back to the tests (never the code's own objects).

These classes are importable inside the sandbox too, so a student can raise any of them: a reply's
error is therefore never rebuilt from the kind the worker claims. The trusted side accepts only
the kinds a student can cause in-process and shows grader-like names as the student's
(:func:`grader.sandbox.replies.student_error`); ``StudentTimeout`` and ``StudentCrash`` are raised
only by the trusted side, from what it observed.
"""

from __future__ import annotations

from typing import Any


class StudentAPIError(TypeError):
    """A test used the ``student`` proxy outside its API (a test bug, or a refused access)."""


class StudentError(Exception):
    """Student code raised: the exception's type name, message and the student's own frames."""

    kind = "exception"
    outcome = "failed"
    # only when set, by grader.testing.checks.hinted on the trusted side (read with getattr)
    hint: str
    # only when set, by grader.testing.diagnosis.watching on the trusted side (read with getattr)
    diagnosis: str

    def __init__(self, message: str, *, exc_type: str = "", frames: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.message, self.exc_type, self.frames = message, exc_type, tuple(frames)

    def feedback(self) -> str:
        """The text a student sees: what was called, what went wrong, where in their code."""
        head = f"{self.exc_type}: {self.message}" if self.exc_type else self.message
        if not self.frames:
            return head
        return head + "\n  in your code:\n" + "\n".join(f"    {f}" for f in self.frames)

    def to_plain(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "message": self.message,
            "exc_type": self.exc_type,
            "frames": list(self.frames),
        }


class StudentNotImplemented(StudentError):
    kind = "not_implemented"


class StudentNotFound(StudentError):
    kind = "not_found"


class BannedAPIError(StudentError):
    kind = "banned"


class StudentTimeout(StudentError):
    """A call ran past its time limit; the worker was stopped."""

    kind = "timeout"
    outcome = "timeout"


class StudentCrash(StudentError):
    """The process running student code died or broke the protocol during a call."""

    kind = "crash"
    outcome = "error"


KINDS: dict[
    str, type[StudentError]
] = {  # every kind; a worker may claim only some (see replies.py)
    cls.kind: cls
    for cls in (
        StudentError,
        StudentNotImplemented,
        StudentNotFound,
        BannedAPIError,
        StudentTimeout,
        StudentCrash,
    )
}
