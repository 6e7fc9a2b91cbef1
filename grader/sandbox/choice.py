"""Which isolation level a grade runs under: probe what this machine offers (strongest first) and
choose.

Levels, strongest first: ``namespace`` (root on Linux), ``bwrap`` (non-root, unprivileged user
namespaces), ``process`` (separate process with rlimits, seccomp and a Landlock file view where
the kernel has one), ``none`` (separate process only). ``--require-isolation`` refuses to grade
below a level.

Kept apart from :mod:`grader.sandbox.isolation` (what one launch at a chosen level looks like):
the probes run once per process, before any launch, and the command line, a batch and the
Gradescope runner only need the choice.
"""

from __future__ import annotations

import functools
import os
import select
import shutil
import signal
import subprocess
import sys

from grader import forked
from grader.errors import UsageError
from grader.sandbox import landlock, privlib
from grader.sandbox.levels import LEVELS, BackendName, Level, is_level


class IsolationError(UsageError):
    """The requested isolation is unavailable here; the message says what to do."""


def rank(level: str) -> int:
    return LEVELS.index(level)


@functools.cache
def available() -> tuple[Level, ...]:
    """Backends that work on this machine, strongest first (probed once per process)."""
    found: list[Level] = []
    if _wants_namespace() and _probe_namespace():
        found.append("namespace")
    if (
        sys.platform.startswith("linux")
        and os.geteuid() != 0
        and shutil.which("bwrap")
        and _probe_bwrap()
    ):
        found.append("bwrap")
    if os.name == "posix":
        found.append("process")
    found.append("none")
    return tuple(found)


def choose(requested: str = "auto", required: str | None = None) -> BackendName:
    """Pick a backend for official grading: ``auto`` means the strongest available; enforce
    ``--require-isolation``; refuse, as a non-root user, ``process`` (student code would run as this
    user, able to read the solutions, the hidden suites and this user's zygote socket).

    ``inprocess`` (the project's own tests and students' local runs: no worker at all) is passed
    through.
    """
    if requested == "inprocess":
        return "inprocess"
    options = available()
    backend: Level
    if requested == "auto":
        backend = options[0]
    elif is_level(requested) and requested in options:
        backend = requested
    else:
        raise IsolationError(
            f"isolation {requested!r} is not available here (available: {', '.join(options)}); "
            "namespace needs root on Linux, bwrap a non-root user with bubblewrap installed"
        )
    if required and rank(backend) < rank(required):
        raise IsolationError(
            f"refusing to grade: isolation {backend!r} is weaker than the required {required!r} "
            f"(available: {', '.join(options)})"
        )
    if backend == "process" and not is_root():
        raise IsolationError(
            "refusing to grade: as a non-root user the only sandbox here is `process`, which would run student code "
            "as you, able to read the solutions, the hidden tests and your grader's files. Run the grader as root "
            "(namespaces), install bubblewrap (`bwrap`) for unprivileged namespaces, or pass `--isolation none` to "
            "grade knowingly without a sandbox (every scorecard then says so)"
        )
    return backend


def is_root() -> bool:
    """Whether this grader runs as root (on a POSIX system): it then drops every worker to a leased
    uid."""
    return os.name == "posix" and os.geteuid() == 0


# "off": act as on a kernel without Landlock (tests, or a kernel that misreports)
LANDLOCK_ENV = "GRADER_LANDLOCK"


@functools.cache
def landlock_abi() -> int:
    """The kernel's Landlock ABI (0: none, or ``$GRADER_LANDLOCK=off``), probed once per process."""
    if not sys.platform.startswith("linux") or os.environ.get(LANDLOCK_ENV) == "off":
        return 0
    return landlock.abi()


# the namespace probe, started by probe_early()
_EARLY: subprocess.Popen[bytes] | _ForkedProbe | None = None


def probe_early() -> None:
    """Start the namespace probe (a fresh interpreter: about 35 ms) now, to run while the caller
    loads its manifest; :func:`available` collects it. Nothing to start where it would not run."""
    global _EARLY
    if _EARLY is None and available.cache_info().currsize == 0 and _wants_namespace():
        _EARLY = _spawn_namespace_probe()


def _wants_namespace() -> bool:
    return sys.platform.startswith("linux") and os.geteuid() == 0


def _spawn_namespace_probe() -> subprocess.Popen[bytes] | _ForkedProbe | None:
    forked_probe = _fork_namespace_probe()
    if forked_probe is not None:
        return forked_probe
    try:
        return subprocess.Popen(
            [sys.executable, "-I", "-S", "-B", str(privlib.launcher()), "probe-namespace"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
            env={"PATH": "/usr/bin:/bin"},
        )
    except OSError:
        return None


class _ForkedProbe:
    """The namespace probe run in a forked copy of this process: what ``Popen`` offers
    :func:`_probe_namespace` (``wait``, ``kill``), waited for on a pidfd."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._fd = os.pidfd_open(pid)

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self._fd], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired("namespace probe", timeout or 0.0)
            os.close(self._fd)
            self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            os.kill(self.pid, signal.SIGKILL)


def _fork_namespace_probe() -> _ForkedProbe | None:
    """The probe in a forked copy of this process (about 1 ms to start, where a fresh interpreter
    took 35-65 ms and held up a later ``grader grade`` that had nothing else left to wait for), the
    launcher's own :func:`~grader.sandbox.launcher.probe_namespace` run there; None where this
    process runs other threads (a fork could deadlock on their locks) or cannot fork or wait on a
    pidfd: a fresh interpreter then, as before."""
    pid = forked.fork_copy(_probe_here) if hasattr(os, "pidfd_open") else None
    if pid is None:
        return None
    try:
        return _ForkedProbe(pid)
    except OSError:  # no pidfd to wait on: this probe is waited for, then a fresh one started
        os.waitpid(pid, 0)
        return None


def _probe_here() -> None:
    """The forked copy's whole life: the probe ends it with its own exit code."""
    quiet = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(quiet, fd)
    from grader.sandbox import launcher

    launcher.probe_namespace()
    os._exit(1)  # it exits by itself: a probe that returns has not shown that namespaces work


def forget_early() -> None:
    """A probe started early and never collected (the command stopped first: Ctrl-C) is stopped and
    reaped, not left behind as a zombie."""
    global _EARLY
    probe, _EARLY = _EARLY, None
    if probe is not None:
        probe.kill()
        probe.wait()


def _probe_namespace() -> bool:
    global _EARLY
    probe, _EARLY = _EARLY or _spawn_namespace_probe(), None
    if probe is None:
        return False
    try:
        return probe.wait(timeout=20) == 0
    except subprocess.TimeoutExpired:
        probe.kill()
        probe.wait()
        return False


def _probe_bwrap() -> bool:
    try:
        done = subprocess.run(
            ["bwrap", "--unshare-all", "--ro-bind", "/", "/", "true"],
            capture_output=True,
            timeout=20,
            cwd="/",
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0
