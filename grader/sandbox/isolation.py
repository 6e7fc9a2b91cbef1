"""Isolation backends: probe what this machine offers (strongest first) and describe a launch.

Levels, strongest first: ``namespace`` (root on Linux), ``bwrap`` (non-root, unprivileged user
namespaces), ``process`` (separate process with rlimits), ``none`` (separate process only: student
laptops). ``--require-isolation`` refuses to grade below a level.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.sandbox.launcher import INSIDE_PACKAGES

LEVELS = ("none", "process", "bwrap", "namespace")
LAUNCHER = Path(__file__).with_name("launcher.py")
LIB_ROOT = Path(__file__).resolve().parents[2]  # the folder holding the `grader` package
CGROUP_V1 = Path("/sys/fs/cgroup")
UID_BASE = 60000


class IsolationError(RuntimeError):
    """The requested isolation is unavailable here; the message says what to do."""


def rank(level: str) -> int:
    return LEVELS.index(level)


@functools.cache
def available() -> tuple[str, ...]:
    """Backends that work on this machine, strongest first (probed once per process)."""
    found = []
    if sys.platform.startswith("linux") and os.geteuid() == 0 and _probe_namespace():
        found.append("namespace")
    if sys.platform.startswith("linux") and os.geteuid() != 0 and shutil.which("bwrap") and _probe_bwrap():
        found.append("bwrap")
    if os.name == "posix":
        found.append("process")
    found.append("none")
    return tuple(found)


def choose(requested: str = "auto", required: str | None = None) -> str:
    """Pick a backend: ``auto`` means the strongest available; enforce ``--require-isolation``."""
    options = available()
    if requested == "auto":
        backend = options[0]
    elif requested in options:
        backend = requested
    else:
        raise IsolationError(f"isolation {requested!r} is not available here (available: {', '.join(options)}); "
                             "namespace needs root on Linux, bwrap a non-root user with bubblewrap installed")
    if required and rank(backend) < rank(required):
        raise IsolationError(f"refusing to grade: isolation {backend!r} is weaker than the required {required!r} "
                             f"(available: {', '.join(options)})")
    return backend


def _probe_namespace() -> bool:
    try:
        done = subprocess.run([sys.executable, "-I", "-S", "-B", str(LAUNCHER), "probe-namespace"],
                              capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _probe_bwrap() -> bool:
    try:
        done = subprocess.run(["bwrap", "--unshare-all", "--ro-bind", "/", "/", "true"], capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@dataclass
class Limits:
    memory_mb: int = 4096
    processes: int = 64
    file_size_mb: int = 32
    cpu_s: int = 600
    output_bytes: int = 8 << 20

    def to_dict(self) -> dict[str, int]:
        return {"memory_mb": self.memory_mb, "processes": self.processes, "file_size_mb": self.file_size_mb,
                "cpu_s": self.cpu_s, "output_bytes": self.output_bytes}


@dataclass
class LaunchSpec:
    """Everything needed to start one worker; ``describe()`` goes into the scorecard."""

    backend: str
    slot: int = 0
    threads: int = 1
    limits: Limits = field(default_factory=Limits)

    @property
    def uid(self) -> int:
        return UID_BASE + self.slot if self.backend == "namespace" else os.getuid() if os.name == "posix" else 0

    def cgroup_paths(self) -> list[str]:
        # root ignores RLIMIT_NPROC, so a root `process` sandbox needs the pids cgroup as much as `namespace`
        wanted = self.backend == "namespace" or (self.backend == "process" and os.name == "posix" and os.geteuid() == 0)
        return _cgroups(self.slot, self.limits) if wanted else []

    def describe(self) -> dict[str, Any]:
        cgroups = self.cgroup_paths()
        return {"backend": self.backend, "uid": self.uid, "limits": self.limits.to_dict(),
                "cgroup": "v1" if cgroups else "none", "seccomp": False, "threads": self.threads}

    def config(self, box: Path, response_fd: int, status_fd: int | None, root_dir: str) -> dict[str, Any]:
        cfg: dict[str, Any] = {
            "mode": self.backend, "python": sys.executable, "lib": str(LIB_ROOT), "site_dirs": site_dirs(),
            "threads": self.threads, "response_fd": response_fd, "box": str(box), "uid": self.uid,
            "limits": self.limits.to_dict(), "root_dir": root_dir}
        cfg["cgroups"] = self.cgroup_paths()
        if self.backend == "namespace":
            cfg.update(status_fd=status_fd, binds=binds(), gpu_devices=gpu_devices())
        if self.backend == "bwrap":
            cfg["bwrap_argv"] = bwrap_argv(box)
        return cfg


def site_dirs() -> list[str]:
    import torch  # noqa: PLC0415 - where torch lives is where the worker must find it

    dirs = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], str(Path(torch.__file__).parents[1])}
    return sorted(d for d in dirs if d)


def binds() -> list[str]:
    """The allowlist of read-only paths a namespace sandbox sees (secrets are absent, not hidden)."""
    prefix = {sys.base_prefix, sys.prefix, str(Path(sys.executable).resolve().parents[1])}
    system = ["/usr", "/lib", "/lib64", "/bin", "/etc/ld.so.cache", "/etc/alternatives"]
    gpu = ["/usr/local/nvidia", "/usr/local/cuda", "/proc/driver/nvidia", "/sys"] if gpu_devices() else []
    return [*system, *sorted(prefix), *site_dirs(), *gpu]


def gpu_devices() -> list[str]:
    return sorted(p.name for p in Path("/dev").glob("nvidia*") if not p.is_dir())


def bwrap_argv(box: Path) -> list[str]:
    argv = [shutil.which("bwrap") or "bwrap", "--unshare-all", "--disable-userns", "--die-with-parent",
            "--new-session", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--bind", str(box), "/box",
            "--chdir", "/box"]
    for package in INSIDE_PACKAGES:  # only the inside of the wall: never the trusted side of `grader`
        argv += ["--ro-bind", str(LIB_ROOT / "grader" / package), f"/sandbox-lib/grader/{package}"]
    for path in binds():
        if os.path.exists(path):
            argv += ["--ro-bind", path, path]
    return argv


def _cgroups(slot: int, limits: Limits) -> list[str]:
    """Per-slot v1 memory and pids groups when writable (a backstop: tmpfs and kernel memory escape rlimits)."""
    made = []
    settings = {"memory": {"memory.limit_in_bytes": str((limits.memory_mb + 512) << 20)},
                "pids": {"pids.max": str(limits.processes)}}
    for controller, values in settings.items():
        # per grader process: two grader runs on one machine never share (or kill) each other's groups
        path = CGROUP_V1 / controller / "attention-grader" / f"p{os.getpid()}-slot-{slot}"
        try:
            path.mkdir(parents=True, exist_ok=True)
            for name, value in values.items():
                (path / name).write_text(value)
        except OSError:
            continue
        made.append(str(path))
    return made
