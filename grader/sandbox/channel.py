"""One running worker seen from the trusted side: send a request, read a reply under a deadline.

Starting, attesting and ending the worker process is :mod:`grader.sandbox.workerproc`'s; a
:class:`Channel` is a :class:`~grader.sandbox.workerproc.WorkerProcess` that speaks the protocol.

Replies are read from their own pipe with caps; the worker's stdout/stderr are drained and kept
only up to 64 KiB each (the rest is counted, and past the output cap the worker is killed). Exactly
one frame answers each request: a second frame, stray bytes or bytes before any request are a
protocol violation. Replies always decode to CPU tensors; the sandbox's CPU time is read from
outside.
"""

from __future__ import annotations

import os
import select
import selectors
import struct
import time
from typing import TYPE_CHECKING, Any

from grader.sandbox.cputime import Progress
from grader.sandbox.workerproc import WorkerProcess

if TYPE_CHECKING:
    from types import ModuleType


def _wire() -> ModuleType:
    """The wire format, imported at the first frame: it imports torch (about a second), and a
    command that starts its worker first (``grader grade``) lets the worker import torch while it
    imports its own."""
    from grader.protocol import wire

    return wire


KEEP_OUTPUT = 64 << 10
MAX_REPLY = 256 << 20
CPU_POLL_S = 0.1
MIN_POLL_S = 0.01  # the shortest wait between CPU readings, as the CPU left nears 0 (_poll_in)


class ChannelError(Exception):
    """The worker timed out, died or broke the protocol; ``kind`` is timeout | crash | protocol |
    output."""

    def __init__(self, kind: str, message: str, *, cpu: bool = False) -> None:
        super().__init__(message)
        self.kind, self.cpu = (
            kind,
            cpu,
        )  # cpu: a timeout of the CPU-time limit (not of the wall-clock backstop)


class Channel(WorkerProcess):
    """The request/reply protocol with one worker: one frame answers each request, read under the
    test's limits."""

    # -- requests -----------------------------------------------------------------------------
    def send(self, value: object) -> None:
        """Send one request (a WireError here is the trusted side's own encoding fault)."""
        data = _wire().encode(value)
        self._expect_silence()
        try:
            view = memoryview(data)
            while view:
                written = os.write(self._req_w, view)
                view = view[written:]
        except (BrokenPipeError, OSError):
            raise ChannelError("crash", self._ended("before it could read the request")) from None

    def _expect_silence(self) -> None:
        """Nothing may wait on the reply pipe before a request: an unasked-for frame is a
        violation."""
        try:
            self._buffer += os.read(self._resp_r, 1 << 16)
        except (BlockingIOError, OSError):
            pass
        if self._buffer:
            raise ChannelError("protocol", "the worker wrote a reply nobody asked for")

    def receive(
        self,
        timeout: float,
        cpu_until: float | None = None,
        stall_s: float | None = None,
        cpu_now: float | None = None,
    ) -> Any:
        """The next reply frame; a timeout once ``cpu_seconds()`` reaches ``cpu_until``, past
        ``timeout`` wall seconds, or after ``stall_s`` wall seconds in which the sandbox used
        (almost) no CPU: a sleeping worker is stopped as soon as before, a busy one starved by a
        loaded machine runs on to its CPU limit. ``cpu_now``: a reading the caller took just before
        (most replies come within the first poll, and then need none here)."""
        start = time.monotonic()
        deadline = start + max(timeout, 0.0)
        next_cpu = 0.0 if cpu_now is None else start + _poll_in(cpu_until, cpu_now)
        progress = Progress(start, self.cpu_seconds() if cpu_now is None else cpu_now)
        while True:
            frame = self._frame()
            if frame is not None:
                return frame
            now = time.monotonic()
            if now >= deadline:
                raise ChannelError(
                    "timeout", f"no answer within {timeout:.1f} s of wall-clock time"
                )
            if cpu_until is not None and now >= next_cpu:
                used = self.cpu_seconds()
                if used >= cpu_until:
                    raise ChannelError("timeout", "its CPU time ran out", cpu=True)
                if stall_s is not None and progress.idle(now, used) > stall_s:
                    raise ChannelError(
                        "timeout",
                        f"no answer within {stall_s:.1f} s of wall-clock time, "
                        "using no CPU time meanwhile",
                    )
                next_cpu = now + _poll_in(cpu_until, used)
            for key, _ in self._selector.select(
                min(deadline - now, max(next_cpu - now, 0.0) if cpu_until else 1.0)
            ):
                self._drain(key)

    def _drain(self, key: selectors.SelectorKey) -> None:
        fd = key.fileobj if isinstance(key.fileobj, int) else key.fileobj.fileno()
        try:
            chunk = os.read(fd, 1 << 20)
        except BlockingIOError:
            return
        if not chunk:
            self._selector.unregister(key.fileobj)
            if key.data == "reply":
                ended = self._ended("during the call")
                # what it printed last (a set-up failure says why) stays in the record
                self._drain_output()
                raise ChannelError("crash", ended)
            return
        if key.data == "reply":
            self._buffer += chunk
            return
        kept = self.output[key.data]
        kept += chunk[: max(0, KEEP_OUTPUT - len(kept))]
        self.output_total += len(chunk)
        if self.output_total > self.launch.limits.output_bytes:
            raise ChannelError(
                "output", f"printed more than {self.launch.limits.output_bytes >> 20} MiB"
            )

    def _drain_output(self) -> None:
        """Read what the worker's stdout/stderr still hold, without waiting (bounded by the output
        cap)."""
        for key in [k for k in self._selector.get_map().values() if k.data != "reply"]:
            while (
                key.fileobj in self._selector.get_map()
                and select.select([key.fileobj], [], [], 0)[0]
            ):
                self._drain(key)

    def _frame(self) -> Any:
        buf = self._buffer
        if len(buf) < 8:
            return None
        wire = _wire()
        if bytes(buf[:4]) != wire.MAGIC:
            raise ChannelError("protocol", "reply does not start with a frame")
        (hlen,) = struct.unpack_from("<I", buf, 4)
        if hlen > wire.MAX_HEADER:
            raise ChannelError("protocol", "reply header too large")
        if len(buf) < 16 + hlen:
            return None
        (plen,) = struct.unpack_from("<Q", buf, 8 + hlen)
        if plen > MAX_REPLY:
            raise ChannelError("protocol", "reply payload over the cap")
        total = 16 + hlen + plen
        if len(buf) < total:
            return None
        if len(buf) > total:
            raise ChannelError("protocol", "the worker wrote more than one reply")
        # the buffer is the frame: decoded where it is, not copied first (10 MB for some replies)
        frame, self._buffer = buf, bytearray()
        del buf
        from grader.protocol import wireparse  # torch is imported by now: _wire() above

        try:  # always to CPU: a reply never allocates device memory on the trusted side
            return wireparse.decode(frame, max_payload=MAX_REPLY)
        except wire.WireError as exc:
            raise ChannelError("protocol", f"malformed reply: {exc}") from None


def _poll_in(cpu_until: float | None, used: float) -> float:
    """Wall seconds to the next CPU reading: the CPU left (one core spends it no faster), between
    MIN_POLL_S and CPU_POLL_S."""
    left = CPU_POLL_S if cpu_until is None else cpu_until - used
    return min(CPU_POLL_S, max(MIN_POLL_S, left))
