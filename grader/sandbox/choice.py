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
import shutil
import subprocess
import sys

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


_EARLY: subprocess.Popen[bytes] | None = None  # the namespace probe, started by probe_early()


def probe_early() -> None:
    """Start the namespace probe (a fresh interpreter: about 35 ms) now, to run while the caller
    loads its manifest; :func:`available` collects it. Nothing to start where it would not run."""
    global _EARLY
    if _EARLY is None and available.cache_info().currsize == 0 and _wants_namespace():
        _EARLY = _spawn_namespace_probe()


def _wants_namespace() -> bool:
    return sys.platform.startswith("linux") and os.geteuid() == 0


def _spawn_namespace_probe() -> subprocess.Popen[bytes] | None:
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
