"""One running worker seen from the trusted side: start, send a request, read a reply under a deadline.

Replies are read from their own pipe with caps; the worker's stdout/stderr are drained and kept
only up to 64 KiB each (the rest is counted, and past the output cap the worker is killed). Exactly
one frame answers each request: a second frame, stray bytes or bytes before any request are a
protocol violation. Replies always decode to CPU tensors; the sandbox's CPU time is read from outside.
"""

from __future__ import annotations

import json
import os
import select
import selectors
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader.sandbox import cgroups, drain, leftovers, privlib, reaping, sweep
from grader.sandbox.attest import Observed, attest
from grader.sandbox.cputime import CpuMeter, Progress, cpuacct_group
from grader.sandbox.isolation import LaunchSpec
from grader.sandbox.zygote_client import ForkedWorker, Zygote

if TYPE_CHECKING:
    from types import ModuleType


def _wire() -> ModuleType:
    """The wire format, imported at the first frame: it imports torch (about a second), and a command that
    starts its worker first (``grader grade``) lets the worker import torch while it imports its own."""
    from grader.protocol import wire

    return wire


KEEP_OUTPUT = 64 << 10
MAX_REPLY = 256 << 20
CPU_POLL_S = 0.1


class ChannelError(Exception):
    """The worker timed out, died or broke the protocol; ``kind`` is timeout | crash | protocol | output."""

    def __init__(self, kind: str, message: str, *, cpu: bool = False) -> None:
        super().__init__(message)
        self.kind, self.cpu = (
            kind,
            cpu,
        )  # cpu: a timeout of the CPU-time limit (not of the wall-clock backstop)


class Channel:
    def __init__(self, launch: LaunchSpec, box: Path, zygote: Zygote | None = None) -> None:
        self.launch, self.box = launch, box
        self.output = {"stdout": bytearray(), "stderr": bytearray()}
        self.output_total = 0
        self._buffer = bytearray()
        self._ns_pid: int | None = None
        self._root_dir = str(sweep.tempdir("root")) if launch.backend == "namespace" else ""
        self._scratch = leftovers.scratch(launch)
        self.forked = False
        self._start(zygote)

    def _start(self, zygote: Zygote | None) -> None:
        req_r, self._req_w = os.pipe()
        self._resp_r, resp_w = os.pipe()
        forked = self._fork(zygote, req_r, resp_w) if zygote is not None else None
        self.proc: subprocess.Popen[bytes] | ForkedWorker = (
            forked if forked is not None else self._popen(req_r, resp_w)
        )
        os.close(req_r)
        os.close(resp_w)
        self._selector = selectors.DefaultSelector()
        assert (
            self.proc.stdout is not None and self.proc.stderr is not None
        )  # both pipes, cold or forked
        for fileobj, name in (
            (self._resp_r, "reply"),
            (self.proc.stdout, "stdout"),
            (self.proc.stderr, "stderr"),
        ):
            os.set_blocking(fileobj if isinstance(fileobj, int) else fileobj.fileno(), False)
            self._selector.register(fileobj, selectors.EVENT_READ, name)
        self.meter = CpuMeter(self.proc.pid, self._cpuacct)

    def _config(self, resp_w: int, status_w: int | None) -> dict[str, Any]:
        cfg = self.launch.config(
            self.box, resp_w, status_w, self._root_dir, str(self._scratch or "")
        )
        # a cpuacct group beside the slot's others, joined the same way: the per-test CPU clock
        self._cpuacct = cpuacct_group(self.launch.slot) if cfg.get("cgroups") else None
        cfg["cgroups"] = [*cfg.get("cgroups", []), *([self._cpuacct] if self._cpuacct else [])]
        self._cgroups = list(cfg["cgroups"])
        self._cpuacct = self._cpuacct or cgroups.cpu_group(
            self._cgroups
        )  # v2: the slot's one group
        return cfg

    @property
    def cgroups(self) -> list[str]:
        return list(self._cgroups)

    def cpu_seconds(self) -> float:
        """CPU seconds the sandbox has used so far (all its processes; compare two readings)."""
        return self.meter.seconds()

    def _popen(self, req_r: int, resp_w: int) -> subprocess.Popen[bytes]:
        """A cold start: a fresh launcher interpreter that isolates itself and execs the worker."""
        status_r, status_w = os.pipe() if self.launch.backend == "namespace" else (None, None)
        proc = subprocess.Popen(
            [
                sys.executable,
                "-I",
                "-S",
                "-B",
                str(privlib.launcher()),
                json.dumps(self._config(resp_w, status_w)),
            ],
            stdin=req_r,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=tuple(fd for fd in (resp_w, status_w) if fd is not None),
            start_new_session=True,
            cwd="/",
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        )  # the launcher goes to the box itself
        if status_r is not None and status_w is not None:
            os.close(status_w)
            with os.fdopen(status_r, "rb") as status:
                line = status.readline().strip()
            self._ns_pid = int(line) if line.isdigit() else None
        return proc

    def _fork(self, zygote: Zygote, req_r: int, resp_w: int) -> ForkedWorker | None:
        """A warm start: the zygote forks a worker with torch already imported; None if it cannot."""
        (status_r, status_w), (out_r, out_w), (err_r, err_w) = os.pipe(), os.pipe(), os.pipe()
        launched = zygote.launch(
            self._config(resp_w, status_w), [req_r, resp_w, out_w, err_w, status_w]
        )
        for fd in (out_w, err_w, status_w):
            os.close(fd)
        if launched:
            try:
                worker = ForkedWorker(out_r, err_r, status_r)
            except OSError:
                pass
            else:
                self._ns_pid = worker.read_ns_pid() if self.launch.backend == "namespace" else None
                self.forked = True
                return worker
        for fd in (out_r, err_r, status_r):
            reaping.close_quietly(fd)
        return None

    def attested(self) -> Observed:
        """What the kernel says this sandbox is (raises :class:`grader.sandbox.attest.AttestationError` unless
        it is what its spec promised); call after the "ready" frame, before any student code is sent."""
        return attest(self.proc.pid, self._req_w, self.launch.expected())

    def memory_cgroup(self) -> str | None:
        """The memory cgroup this worker (cold or forked) joined, read from outside by :mod:`memwatch`."""
        groups = getattr(self, "_cgroups", [])
        return next((g for g in groups if "/memory/" in g or Path(g, "memory.peak").exists()), None)

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
        """Nothing may wait on the reply pipe before a request: an unasked-for frame is a violation."""
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
        """The next reply frame; a timeout once ``cpu_seconds()`` reaches ``cpu_until``, past ``timeout`` wall
        seconds, or after ``stall_s`` wall seconds in which the sandbox used (almost) no CPU: a sleeping worker is
        stopped as soon as before, a busy one starved by a loaded machine runs on to its CPU limit. ``cpu_now``: a
        reading the caller took just before (most replies come within the first poll, and then need none here)."""
        start = time.monotonic()
        deadline = start + max(timeout, 0.0)
        next_cpu = 0.0 if cpu_now is None else start + CPU_POLL_S
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
                next_cpu = now + CPU_POLL_S
            for key, _ in self._selector.select(
                min(deadline - now, CPU_POLL_S if cpu_until else 1.0)
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
                self._drain_output()  # what it printed last (a set-up failure says why) stays in the record
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
        """Read what the worker's stdout/stderr still hold, without waiting (bounded by the output cap)."""
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
        frame, self._buffer = bytes(buf[:total]), bytearray(buf[total:])
        del buf  # the frame is the only copy held while it is decoded
        if self._buffer:
            raise ChannelError("protocol", "the worker wrote more than one reply")
        from grader.protocol import wireparse  # torch is imported by now: _wire() above

        try:  # always to CPU: a reply never allocates device memory on the trusted side
            return wireparse.decode(frame, max_payload=MAX_REPLY)
        except wire.WireError as exc:
            raise ChannelError("protocol", f"malformed reply: {exc}") from None

    # -- ending -------------------------------------------------------------------------------
    def _ended(self, when: str) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.wait()
        return f"the worker process ended {when} ({reaping.status(code)})"

    def kill(self) -> None:
        if self._ns_pid:
            reaping.quiet_signal(
                self._ns_pid, signal.SIGKILL
            )  # pid 1 of the namespace: the kernel kills the rest
            self._let_proxy_reap()
        reaping.quiet_signal(-self.proc.pid, signal.SIGKILL)
        self._kill_cgroup()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        leftovers.clear(
            self.launch, self._scratch
        )  # daemons that left the group, files outside the sandbox
        self._scratch = None
        self.close_fds()

    def _let_proxy_reap(self) -> None:
        """Give the proxy (the namespace's parent) a moment to reap pid 1 before it is killed itself:
        killed first, it would leave pid 1 a zombie for the host's init, still counted under the
        sandbox's uid and pids cgroup for up to half a minute (sandbox.md §8, pitfall 4)."""
        try:
            self.proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            pass

    def _kill_cgroup(self) -> None:
        reaping.kill_cgroups(self._cgroups, rounds=50 if self.launch.backend == "process" else 0)

    def close_fds(self) -> None:
        self.meter.close()
        for fd in (self._req_w, self._resp_r):
            reaping.close_quietly(fd)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream:
                stream.close()
        if isinstance(self.proc, ForkedWorker):
            self.proc.close_status()
        self._selector.close()
        if self._root_dir:
            try:
                os.rmdir(self._root_dir)
            except OSError:
                pass

    def close(self) -> None:
        """End the worker. It is disposable and holds nothing to flush, so it is killed at once: a
        polite exit would wait ~0.5 s for torch's interpreter teardown on every submission.

        Its cgroups go too, once drained: left behind, every grade would leave empty groups (hundreds a
        day); a later worker of the same slot simply makes them again."""
        self.kill()
        if drain.wait_drained(self._cgroups, timeout=3.0):
            reaping.remove_groups(self._cgroups)
