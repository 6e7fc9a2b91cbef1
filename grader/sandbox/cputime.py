"""The CPU time a sandbox has used, read from outside it (trusted side).

Per-test limits count the sandbox's CPU seconds, not wall seconds: a correct submission graded on
a busy machine (or with ``-j`` above the core count) gets fewer wall seconds of CPU, never less
work done, so it must not time out. A wall-clock backstop (a multiple of the limit) still stops
code that burns no CPU (``time.sleep``).

Where the kernel offers a v1 ``cpuacct`` controller, each launch slot gets a group the sandbox
joins with its other cgroups (one read gives the whole sandbox, children included); under cgroup v2
the slot's one group has ``cpu.stat`` (:func:`grader.sandbox.cgroups.cpu_group`). Otherwise the
process tree under the launcher is summed from ``/proc/<pid>/stat`` (children found by ppid; a
dead child's time is in its parent's ``cutime`` once reaped).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

CPUACCT = Path("/sys/fs/cgroup/cpuacct")
TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
RESCAN_S = 0.5  # how often the /proc fallback looks for new descendants
MAX_PROCS = 4096


def cpuacct_group(slot: int) -> str | None:
    """This grader process's cpuacct group for ``slot`` (made on first use); None where
    unavailable."""
    if not (CPUACCT / "cpuacct.usage").exists():
        return None
    path = CPUACCT / "attention-grader" / f"p{os.getpid()}-slot-{slot}"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return str(path) if (path / "cpuacct.usage").exists() else None


class CpuMeter:
    """CPU seconds used by one sandbox (monotonic while it lives; compare two readings).

    A group's counter file stays open and is re-read with ``pread`` (about 2 µs): a grade reads it
    once or twice per request to its worker, and opening it by path each time cost a third of a
    millisecond of the trusted process's CPU (a full grade made about 3,400 readings)."""

    def __init__(self, root_pid: int, group: str | None) -> None:
        self.root_pid, self.group = root_pid, group
        self._pids: list[int] = [root_pid]
        self._scanned = 0.0
        self._fd: int | None = None
        self._v1 = False

    def seconds(self) -> float:
        if self.group is not None:
            try:
                return self._group_seconds(self.group)
            except (OSError, ValueError, StopIteration):
                self.close()
                self.group = None  # the group went away: fall back to /proc for the rest
        if time.monotonic() - self._scanned > RESCAN_S:
            self._pids = descendants(self.root_pid)
            self._scanned = time.monotonic()
        return sum(_stat_ticks(pid) for pid in self._pids) / TICK

    def _group_seconds(self, group: str) -> float:
        """A v1 cpuacct group's ``cpuacct.usage`` (ns), or a v2 group's ``cpu.stat``
        ``usage_usec``."""
        if self._fd is None:
            self._v1 = os.path.exists(os.path.join(group, "cpuacct.usage"))
            self._fd = os.open(
                os.path.join(group, "cpuacct.usage" if self._v1 else "cpu.stat"), os.O_RDONLY
            )
        data = os.pread(self._fd, 4096, 0)
        if self._v1:
            return int(data) / 1e9
        return (
            int(
                next(
                    line.split()[1] for line in data.splitlines() if line.startswith(b"usage_usec ")
                )
            )
            / 1e6
        )

    def close(self) -> None:
        """Let go of the group's counter file (a later reading opens it again)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def descendants(root: int) -> list[int]:
    """``root`` and every process below it (one pass over /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields:
                children.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    stack = [root]
    while stack and len(found) < MAX_PROCS:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, ()))
    return found


def _stat_fields(pid: int) -> list[str]:
    """The fields of /proc/<pid>/stat after the command name (state first); [] if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return []
    return data[data.rfind(b")") + 2 :].decode("ascii", "replace").split()


def _stat_ticks(pid: int) -> int:
    fields = _stat_fields(pid)
    # utime, stime, cutime, cstime: fields 14-17 of stat(5), 11-14 here (the state is field 3)
    return sum(int(f) for f in fields[11:15]) if len(fields) > 14 else 0


MIN_CPU_RATE = 0.02  # a sandbox using less of a core than this makes no progress (asleep, blocked)


class Progress:
    """Since when a sandbox has used no CPU time worth counting (under ``MIN_CPU_RATE`` of a
    core)."""

    def __init__(self, now: float, cpu: float) -> None:
        self.since, self.checked, self.cpu = now, now, cpu

    def idle(self, now: float, cpu: float) -> float:
        if cpu - self.cpu >= MIN_CPU_RATE * (now - self.checked):
            self.since = now
        self.checked, self.cpu = now, cpu
        return now - self.since
