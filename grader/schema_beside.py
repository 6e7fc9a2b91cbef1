"""The JSON Schema checks of one command made in a forked copy of it, which imports jsonschema while
the command goes on.

``import jsonschema`` costs 55-65 ms, and a later ``grader grade`` paid it before anything else
could start: the manifest is checked first. :func:`start` forks a copy of the command (trusted
code only, single-threaded, before torch) that imports jsonschema at once and then answers
:func:`grader.schema.check` requests (the manifest, the cached proof, the scorecard) over a pair of
pipes; the command meanwhile computes what needs no manifest. The version check and every decision
stay in :func:`grader.schema.validate`; the copy runs the same :func:`~grader.schema.check`.

A copy that cannot answer (it died, it sent something malformed, it took over ``ANSWER_S``) is
dropped, and the check is made in this process as before. A process forked from the command later
(the integrity review's copy, the canary's) forgets the copy: its requests would interleave with
the command's on the same pipes.
"""

from __future__ import annotations

import json
import os
import select
import signal
import struct

from grader import forked, schema

ANSWER_S = 30.0  # a check takes milliseconds; past this the copy is taken for stuck
MAX_FRAME = 64 << 20  # a scorecard is well under 1 MiB
_forget_registered = False


class Beside:
    """The command's end of a running copy: :meth:`check` is :func:`grader.schema.check` made
    there."""

    def __init__(self, pid: int, ask: int, answers: int) -> None:
        self.pid, self._ask, self._answers = pid, ask, answers

    def check(self, kind: str, document: object) -> str | None:
        """The copy's answer: None (valid) or the message; ``OSError``/``ValueError`` when it gives
        none."""
        _send(self._ask, json.dumps({"kind": kind, "document": document}).encode())
        reply = json.loads(_receive(self._answers, ANSWER_S))
        if type(reply) is not dict or set(reply) != {"message"}:
            raise ValueError("malformed answer")
        message = reply["message"]
        if message is not None and type(message) is not str:
            raise ValueError("malformed answer")
        return message

    def close(self) -> None:
        """End the copy (nothing of it is kept: it only answers) and reap it."""
        for fd in (self._ask, self._answers):
            os.close(fd)
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def start() -> Beside | None:
    """Fork the copy and route :func:`grader.schema.validate`'s checks to it; None (checks made here,
    as before) unless this process is single-threaded and has a spare core."""
    if schema.elsewhere is not None or len(os.sched_getaffinity(0)) < 2:
        return None
    _register_forget()
    ask_r, ask_w = os.pipe()
    answer_r, answer_w = os.pipe()
    pid = forked.fork_copy(lambda: _serve(ask_r, answer_w, (ask_w, answer_r)))
    os.close(ask_r)
    os.close(answer_w)
    if pid is None:
        os.close(ask_w)
        os.close(answer_r)
        return None
    schema.elsewhere = beside = Beside(pid, ask_w, answer_r)
    return beside


def stop() -> None:
    """Checks made here again; the copy ends."""
    beside, schema.elsewhere = schema.elsewhere, None
    if isinstance(beside, Beside):
        beside.close()


def _register_forget() -> None:
    global _forget_registered
    if not _forget_registered:
        os.register_at_fork(after_in_child=_forget)
        _forget_registered = True


def _forget() -> None:
    """In any process forked from the command: the copy is the command's alone."""
    beside, schema.elsewhere = schema.elsewhere, None
    if isinstance(beside, Beside):
        for fd in (beside._ask, beside._answers):
            os.close(fd)


def _serve(ask: int, answers: int, commands: tuple[int, int]) -> None:
    """The copy's whole life: import jsonschema, answer until the command closes its end (the
    command's own ends closed here first)."""
    for fd in commands:
        os.close(fd)
    os.dup2(2, 1)  # the command's stdout may be a JSON document: nothing of the copy's joins it
    schema.check("assignments", {})  # jsonschema imported and the first validator built now
    while True:
        try:
            request = json.loads(_receive(ask, None))
        except EOFError:
            return
        message = schema.check(request["kind"], request["document"])
        _send(answers, json.dumps({"message": message}).encode())


def _send(fd: int, data: bytes) -> None:
    view = memoryview(struct.pack("<I", len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def _receive(fd: int, timeout: float | None) -> bytes:
    (size,) = struct.unpack("<I", _exactly(fd, 4, timeout))
    if size > MAX_FRAME:
        raise ValueError("answer over the bound")
    return _exactly(fd, size, timeout)


def _exactly(fd: int, size: int, timeout: float | None) -> bytes:
    chunks, left = [], size
    while left:
        if timeout is not None and not select.select([fd], [], [], timeout)[0]:
            raise TimeoutError("no answer from the schema checks' copy")
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError("the other end closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
