"""What a worker's reply may say, judged on the trusted side: shapes, error kinds, names, text.

Everything in a reply was written by a process that ran student code, so nothing in it is taken as
the grader's own observation. A reply must be exactly ``{"ok": value}``, ``{"error": {...}}`` or
``{"api_error": text}`` (anything else is a protocol violation). An error may only claim the kinds a
student can legitimately cause in-process; timeouts and crashes are what the *grader* saw, so a
claimed ``timeout``/``crash``/unknown kind becomes a plain student exception, and an exception type
named like one of the grader's own labels is shown as the student's ("your code raised an exception
named WorkerCrash"). All text goes through :mod:`grader.safetext`.
"""

from __future__ import annotations

import re
from typing import Any, cast

from grader import safetext
from grader.protocol import errors
from grader.sandbox.channel import ChannelError

WORKER_KINDS: dict[str, type[errors.StudentError]] = {
    "exception": errors.StudentError,
    "not_implemented": errors.StudentNotImplemented,
    "not_found": errors.StudentNotFound,
    "banned": errors.BannedAPIError,
}
# names of the grader's own labels: Worker*, Student*, Grader*, … as a whole word anywhere in the
# name
_RESERVED = re.compile(
    r"(?<![a-z0-9])(worker|student|grader|channel|wire|sandbox|suite|bannedapierror)", re.IGNORECASE
)
MAX_MESSAGE, MAX_FRAMES, MAX_FRAME = 2000, 20, 300


def check(reply: object, op: object = None) -> tuple[str, Any]:
    """``(key, body)`` of a well-formed reply to ``op``; ``ChannelError("protocol")`` for any other
    shape."""
    if type(reply) is not dict or len(reply) != 1:
        raise ChannelError("protocol", "the reply is not a one-key object")
    ((key, body),) = reply.items()
    if key == "ok" and not _fits(op, body):
        raise ChannelError(
            "protocol", f"the reply to a {safetext.name(op, 20)!r} request has the wrong shape"
        )
    if (
        key == "ok"
        or (key == "error" and type(body) is dict)
        or (key == "api_error" and type(body) is str)
    ):
        return key, body
    raise ChannelError("protocol", f"unexpected reply {safetext.name(key, 40)!r}")


def _fits(op: object, body: object) -> bool:
    """What an ``ok`` body must look like for the operations whose answer has a fixed shape."""
    if op == "measure":
        return type(body) is tuple and len(body) == 2 and type(body[1]) is dict
    if op == "grads":
        return type(body) is tuple and len(body) == 2 and type(body[1]) is tuple
    if op in ("release", "seed"):
        return body is None
    return True


def unwrap(key: str, body: object) -> Any:
    """The value of an ``ok`` reply; raise what an ``error``/``api_error`` reply reports."""
    if key == "ok":
        return body
    if key == "api_error":
        raise errors.StudentAPIError(safetext.text(body, MAX_MESSAGE))
    raise student_error(
        cast("dict[str, object]", body)
    )  # check() lets an error through only as a dict


def student_error(body: dict[str, object]) -> errors.StudentError:
    """The exception a worker reported, as the grader may show it (never a grader label)."""
    kind = body.get("kind")
    cls = WORKER_KINDS.get(kind) if type(kind) is str else None
    exc_type = safetext.name(body.get("exc_type") or "", 200)
    if cls is None:  # timeout, crash or unknown: only the grader observes those
        claimed = errors.KINDS[kind].__name__ if type(kind) is str and kind in errors.KINDS else ""
        exc_type, cls = disowned(exc_type or claimed or "StudentError"), errors.StudentError
    elif _RESERVED.search(exc_type) and not (
        cls is errors.BannedAPIError and exc_type == "BannedAPIError"
    ):
        exc_type = disowned(exc_type)
    message = safetext.text(body.get("message", ""), MAX_MESSAGE)
    frames = body.get("frames")
    lines = (
        tuple(safetext.name(f, MAX_FRAME) for f in frames[:MAX_FRAMES])
        if type(frames) is list
        else ()
    )
    return cls(message, exc_type=exc_type, frames=lines)


def disowned(exc_type: str) -> str:
    return f"your code raised an exception named {exc_type}"
