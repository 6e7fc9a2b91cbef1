"""A trusted function run in a forked copy of this process, its JSON result read back.

The canary's two grades (the references and the stubs) run this way beside the student's on a
machine's first run, so that one command grades three submissions on all of its cores instead of
one after another. Only the trusted side's own code runs in the copy (``grade()``, whose workers
are sandboxed as always); no student code ever does. The result comes back as JSON on a pipe,
bounded, and the copy ends with ``os._exit``: it never returns into its parent's stack (whose
``finally`` blocks would close the parent's sandboxes twice) nor runs its parent's exit handlers.

Forking a process that runs other threads can leave the copy deadlocked on a lock one of them
held, so :func:`start` refuses (None) unless this process has a single thread (counted by the
kernel: native threads too); the caller then does the work itself, as before.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from grader.errors import GraderFault

MAX_RESULT_BYTES = 64 << 20
REAP_WAIT_S = 10.0  # a cancelled copy cleans up its sandboxes (as on Ctrl-C) before it is killed


class ForkedFault(GraderFault):
    """The forked copy failed: it raised (the message names the exception) or died without a
    result."""


class Forked:
    """One running copy: :meth:`result` waits for its value, :meth:`cancel` stops it."""

    def __init__(self, pid: int, fd: int) -> None:
        self.pid, self.done = pid, False
        self.fd: int | None = fd  # fd: the pipe's end, until read or closed

    def result(self) -> Any:
        """The function's JSON-decoded return value; :class:`ForkedFault` if it raised or died."""
        data = self._read()
        status = self._reap(block=True)
        try:
            reply = json.loads(data)
        except ValueError:
            reply = None
        if not isinstance(reply, dict) or set(reply) not in ({"value"}, {"fault"}):
            raise ForkedFault(f"a forked grading process ended without a result ({_how(status)})")
        if "fault" in reply:
            raise ForkedFault(str(reply["fault"])[:2000])
        return reply["value"]

    def cancel(self) -> None:
        """Stop the copy (SIGTERM: it kills its sandboxes as on Ctrl-C; SIGKILL after
        ``REAP_WAIT_S``) and reap it."""
        if self.done:
            return
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        os.kill(self.pid, signal.SIGTERM)
        deadline = time.monotonic() + REAP_WAIT_S
        while time.monotonic() < deadline:
            if self._reap(block=False) is not None:
                return
            time.sleep(0.02)
        os.kill(self.pid, signal.SIGKILL)
        self._reap(block=True)

    def _read(self) -> bytes:
        chunks, size, fd = [], 0, self.fd
        if fd is None:
            raise ForkedFault("a forked grading process's result was read already")
        self.fd = None
        with os.fdopen(fd, "rb", closefd=True) as pipe:
            while chunk := pipe.read(1 << 16):
                size += len(chunk)
                if size > MAX_RESULT_BYTES:
                    break  # not ours to trust past the bound: the parse below fails
                chunks.append(chunk)
        return b"".join(chunks)

    def _reap(self, *, block: bool) -> int | None:
        pid, status = os.waitpid(self.pid, 0 if block else os.WNOHANG)
        if pid == 0:
            return None
        self.done = True
        return status


def _how(status: int | None) -> str:
    if status is not None and os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.waitstatus_to_exitcode(status) if status is not None else '?'}"


def threads() -> int:
    """This process's thread count, as the kernel sees it (Python's and native threads alike)."""
    with open("/proc/self/status", encoding="ascii", errors="replace") as status:
        for line in status:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return 0  # unknown: never fork on a guess


def start(
    work: Callable[[], Any], *, after_fork: Callable[[], None] = lambda: None
) -> Forked | None:
    """Run ``work()`` in a forked copy of this process (``after_fork`` first, there); None when
    this process is not single-threaded (or cannot fork): the caller runs ``work`` itself."""
    read, write = os.pipe()

    def life() -> None:
        os.close(read)
        _child(write, work, after_fork)

    pid = fork_copy(life)
    if pid is None:
        os.close(read)
        os.close(write)
        return None
    os.close(write)
    return Forked(pid, read)


def fork_copy(life: Callable[[], None]) -> int | None:
    """The pid of a forked copy of this process that runs ``life()`` and then ends with
    ``os._exit`` (1 if it raised), never returning into its parent's stack; None where this process
    runs other threads (the copy could deadlock on a lock one of them held) or cannot fork. Every
    copy the trusted side forks is made here: the canary's and the review's grades, the schema
    checks' copy, the namespace probe."""
    if threads() != 1:
        return None
    sys.stdout.flush()  # else the copy would write its parent's buffered output a second time
    sys.stderr.flush()
    try:
        pid = os.fork()
    except OSError:
        return None
    if pid == 0:  # pragma: no cover - the copy's coverage is not collected; its results are checked
        code = 1
        try:
            life()
            code = 0
        finally:
            os._exit(code)
    return pid


def _child(write: int, work: Callable[[], Any], after_fork: Callable[[], None]) -> None:
    """The copy's whole life: never returns."""
    code = 1
    try:
        os.dup2(2, 1)  # the parent's stdout may be a JSON document: nothing of the copy's joins it
        after_fork()
        reply: dict[str, Any] = {"value": work()}
    except BaseException as exc:  # noqa: BLE001 - Ctrl-C and SIGTERM included: the parent decides
        reply = {"fault": f"{type(exc).__name__}: {exc}"}
    try:
        with os.fdopen(write, "wb") as pipe:
            pipe.write(json.dumps(reply).encode())
        code = 0
    finally:
        os._exit(code)
