"""The trusted side of the zygote: start it, ask it for workers, and watch the workers it forks.

A :class:`Zygote` belongs to one batch slot. :meth:`Zygote.launch` hands the zygote a launch config
and the worker's pipe ends over a ``SOCK_SEQPACKET`` socket; the returned :class:`ForkedWorker`
behaves like the ``subprocess.Popen`` of a cold launcher for :class:`grader.sandbox.channel.Channel`
(``pid``, ``stdout``, ``stderr``, ``poll``, ``wait``), its exit code read from the status pipe,
since the forked proxy is the zygote's child, not ours.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from grader.sandbox import privlib, view, workerenv
from grader.sandbox.isolation import site_dirs

FORKABLE = ("none", "process", "namespace")  # bwrap must exec its own sandbox: no zygote there
STATUS_WAIT_S = 10.0


def zygote_python() -> str:
    """The zygote's interpreter: as root, the one a leased uid can run
    (:func:`grader.sandbox.view.worker_python`), since a ``process`` worker it forks reads the rest
    of its standard library as that uid."""
    if os.name == "posix" and os.geteuid() == 0:
        return view.worker_python() or sys.executable
    return sys.executable


def zygote_script() -> Path:
    """The zygote program, from the sandbox side's private library
    (:mod:`grader.sandbox.privlib`)."""
    return privlib.ensure() / "grader" / "sandbox" / "zygote.py"


class Zygote:
    """One zygote process (torch imported, single-threaded) for one batch slot."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        config = {
            "lib": str(privlib.ensure()),
            "site_dirs": site_dirs(),
            "control_fd": theirs.fileno(),
        }
        self.proc = subprocess.Popen(
            [zygote_python(), "-I", "-S", "-B", str(zygote_script()), json.dumps(config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            pass_fds=(theirs.fileno(),),
            start_new_session=True,
            cwd="/",
            env={
                "PATH": "/usr/bin:/bin",
                "LANG": "C.UTF-8",
                "OMP_NUM_THREADS": "1",
                **workerenv.MALLOC_ENV,
            },
        )
        theirs.close()
        self.sock = ours
        self.ready = False
        self.started = time.monotonic()

    def wait_ready(self, timeout: float = 120.0) -> bool:
        """True once the zygote has imported torch, single-threaded (a threaded zygote cannot fork
        safely)."""
        if not self.ready and self.proc.poll() is None:
            readable, _, _ = select.select([self.sock], [], [], timeout)
            try:
                message = json.loads(self.sock.recv(4096) or b"{}") if readable else {}
            except (OSError, ValueError):
                message = {}
            self.ready = message.get("ready") is True and message.get("tasks") == 1
            if not self.ready:
                self.close()
        return self.ready

    @property
    def alive(self) -> bool:
        return self.ready and self.proc.poll() is None

    def launch(self, config: dict[str, Any], fds: list[int]) -> bool:
        """Ask for one worker; False if the zygote is gone (the caller then starts a cold one)."""
        if not self.alive:
            return False
        try:
            socket.send_fds(self.sock, [json.dumps(config).encode()], fds)
        except OSError:
            self.close()
            return False
        return True

    def close(self) -> None:
        self.ready = False
        self.sock.close()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


class ForkedWorker:
    """A worker forked by the zygote, seen through its pipes and status lines (a small ``Popen``
    look-alike)."""

    def __init__(self, stdout: int, stderr: int, status: int) -> None:
        self.stdout: IO[bytes] = os.fdopen(stdout, "rb", buffering=0)
        self.stderr: IO[bytes] = os.fdopen(stderr, "rb", buffering=0)
        self._status, self._pending = status, b""
        self.returncode: int | None = None
        self.ns_pid: int | None = None
        first = self._line(STATUS_WAIT_S)
        if not first.startswith("proxy "):
            self.pid = 0
            raise OSError(f"the zygote did not start a worker ({first or 'no status'})")
        self.pid = int(first.split()[1])  # the proxy called setsid: its pid is the group's id

    def read_ns_pid(self) -> int | None:
        line = self._line(STATUS_WAIT_S)
        self.ns_pid = int(line) if line.isdigit() else None
        return self.ns_pid

    def poll(self) -> int | None:
        return self.wait(0) if self.returncode is None else self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        """The worker's exit code (128+signal when killed); raise TimeoutExpired like Popen.wait."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            line = self._line(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if line.startswith("exit "):
                self.returncode = int(line.split()[1])
            elif line == "" and self._status < 0:
                self.returncode = 137  # the proxy was killed before it could report
            elif deadline is not None and time.monotonic() >= deadline:
                if timeout == 0:
                    return None
                raise subprocess.TimeoutExpired("sandboxed worker", timeout or 0)
        return self.returncode

    def _line(self, timeout: float | None) -> str:
        """The next status line, '' on EOF (then the status fd is closed) or when ``timeout``
        passes."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._pending and self._status >= 0:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self._status], [], [], wait)[0]:
                return ""
            chunk = os.read(self._status, 256)
            if not chunk:
                os.close(self._status)
                self._status = -1
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line.decode("ascii", "replace").strip()

    def close_status(self) -> None:
        if self._status >= 0:
            os.close(self._status)
            self._status = -1
