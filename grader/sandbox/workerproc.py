"""One sandboxed worker as a process on the trusted side: started, measured, and ended.

Started cold (a fresh launcher interpreter that isolates itself and execs the worker,
:mod:`grader.sandbox.launcher`) or warm (forked by a zygote, :mod:`grader.sandbox.zygote_client`),
with its request and reply pipes, its cgroups and its CPU meter; attested from /proc; ended by
killing the whole sandbox (the namespace's pid 1, the process group, the cgroups) and clearing what
it left behind.

Kept apart from the request/reply protocol spoken with it (:class:`grader.sandbox.channel.Channel`,
which is a :class:`WorkerProcess`).
"""

from __future__ import annotations

import fcntl
import json
import os
import selectors
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from grader.sandbox import cgroups, drain, leftovers, privlib, reaping, sweep
from grader.sandbox.attest import Observed, attest
from grader.sandbox.cputime import CpuMeter, cpuacct_group
from grader.sandbox.isolation import LaunchSpec
from grader.sandbox.zygote_client import ForkedWorker, Zygote


class WorkerProcess:
    """A started worker process and the sandbox around it (see the module docstring)."""

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
        _widen(self._req_w, self._resp_r)
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
        """A warm start: the zygote forks a worker with torch already imported; None if it
        cannot."""
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
        """What the kernel says this sandbox is (raises
        :class:`grader.sandbox.attest.AttestationError` unless it is what its spec promised); call
        after the "ready" frame, before any student code is sent."""
        return attest(self.proc.pid, self._req_w, self.launch.expected())

    def memory_cgroup(self) -> str | None:
        """The memory cgroup this worker (cold or forked) joined, read from outside by
        :mod:`memwatch`."""
        groups = getattr(self, "_cgroups", [])
        return next((g for g in groups if "/memory/" in g or Path(g, "memory.peak").exists()), None)

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
        """Give the proxy (the namespace's parent) a moment to reap pid 1 before it is killed
        itself: killed first, it would leave pid 1 a zombie for the host's init, still counted under
        the sandbox's uid and pids cgroup for up to half a minute (sandbox.md §8, pitfall 4)."""
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

        Its cgroups go too, once drained: left behind, every grade would leave empty groups
        (hundreds a day); a later worker of the same slot simply makes them again."""
        self.kill()
        if drain.wait_drained(self._cgroups, timeout=3.0):
            reaping.remove_groups(self._cgroups)


PIPE_BYTES = 1 << 20  # Linux's default bound for an unprivileged pipe (/proc/sys/fs/pipe-max-size)


def _widen(*fds: int) -> None:
    """Requests and replies through 1 MiB pipes, not the default 64 KiB: a grade moves about 27 MB
    (a GPT-2-size module's parameters among it), and each 64 KiB was a wake-up of each side. Where
    the kernel refuses (a user over its pipe quota), the default stays."""
    for fd in fds:
        try:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        except (OSError, AttributeError):
            return
