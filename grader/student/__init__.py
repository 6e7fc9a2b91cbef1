"""The only door to student code.

Tests reach a submission through the ``student`` fixture, a
:class:`~grader.student.proxy.StudentProxy`. Its backend either runs the code in this process
(students' local runs) or in a sandboxed worker (instructors' grading); the proxy's surface is the
same, so a test never knows which.
"""

from __future__ import annotations

from grader.protocol.errors import (
    BannedAPIError,
    StudentAPIError,
    StudentCrash,
    StudentError,
    StudentNotFound,
    StudentNotImplemented,
    StudentTimeout,
)
from grader.student.proxy import Handle, StudentProxy

__all__ = [
    "BannedAPIError",
    "Handle",
    "StudentAPIError",
    "StudentCrash",
    "StudentError",
    "StudentNotFound",
    "StudentNotImplemented",
    "StudentProxy",
    "StudentTimeout",
]
