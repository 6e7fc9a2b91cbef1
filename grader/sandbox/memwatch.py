"""Peak memory of one sandboxed call, read from outside: the sandbox's memory cgroup.

A figure produced inside the worker (``grader.inside.peak``) can be switched off by student code
(``torch._C._disable_current_modes()`` drops the dispatch mode). The kernel's cgroup accounting
cannot: every page any process of the sandbox touches is charged to the slot's memory group.

cgroup v1 (what the launcher creates here): ``memory.max_usage_in_bytes`` is reset to the current
usage by writing 0, so the figure is (peak after the call) - (usage just before it). cgroup v2's
``memory.peak`` can only be reset per open file descriptor (kernel 6.12+), which this reader also
uses when the group is a v2 one. Where neither exists (backends ``none``/``process`` as non-root,
student laptops), :func:`start` returns ``None`` and callers fall back to the in-process figure.
"""

from __future__ import annotations

import os
from pathlib import Path


class MemoryWatch:
    """One measurement window over one memory cgroup: ``start()`` before the request, ``delta()``
    after."""

    def __init__(self, group: Path, before: int, peak_fd: int | None) -> None:
        self.group, self.before, self._peak_fd = group, before, peak_fd

    def delta(self) -> int | None:
        """Bytes charged to the group at its peak since ``start()``, above the usage just before
        it."""
        try:
            peak = self._read_peak()
        except (OSError, ValueError):
            return None
        finally:
            self.close()
        return max(0, peak - self.before)

    def close(self) -> None:
        if self._peak_fd is not None:
            os.close(self._peak_fd)
            self._peak_fd = None

    def _read_peak(self) -> int:
        if self._peak_fd is not None:
            return int(os.pread(self._peak_fd, 64, 0).split()[0])
        return _read_int(self.group / "memory.max_usage_in_bytes")


def figures(stats: object, watch: MemoryWatch | None) -> dict[str, float]:
    """A measured call's figures: the worker's own numbers (advisory), and ``max_memory_bytes`` only
    as read here from the cgroup through ``watch`` (a worker's own claim to it is dropped; absent
    without a cgroup)."""
    numbers = dict(stats) if isinstance(stats, dict) else {}
    kept = {
        str(k): float(v)
        for k, v in numbers.items()
        if type(v) in (int, float) and k != "max_memory_bytes"
    }
    outside = watch.delta() if watch is not None else None
    if outside is not None:
        kept["max_memory_bytes"] = float(outside)
    return kept


def start(group: str | Path | None) -> MemoryWatch | None:
    """Reset the group's peak and remember its usage; ``None`` when the group cannot be read or
    reset."""
    if not group:
        return None
    path = Path(group)
    try:
        if (path / "memory.max_usage_in_bytes").exists():
            return _start_v1(path)
        if (path / "memory.peak").exists():
            return _start_v2(path)
    except (OSError, ValueError):
        return None
    return None


def _start_v1(path: Path) -> MemoryWatch:
    before = _read_int(path / "memory.usage_in_bytes")
    (path / "memory.max_usage_in_bytes").write_text(
        "0"
    )  # v1: the peak restarts from the current usage
    return MemoryWatch(path, before, None)


def _start_v2(path: Path) -> MemoryWatch:
    # v2 (kernel 6.12+): writing to an open memory.peak resets the peak seen through that descriptor
    # only
    fd = os.open(path / "memory.peak", os.O_RDWR)
    try:
        os.write(fd, b"reset\n")
        before = _read_int(path / "memory.current")
    except OSError:
        os.close(fd)
        raise
    return MemoryWatch(path, before, fd)


def _read_int(path: Path) -> int:
    return int(path.read_text().split()[0])


def usage(group: str | Path | None) -> int | None:
    """Bytes charged to the group now (v1 ``memory.usage_in_bytes``, v2 ``memory.current``); None if
    unknown."""
    if not group:
        return None
    for name in ("memory.usage_in_bytes", "memory.current"):
        try:
            return _read_int(Path(group) / name)
        except (OSError, ValueError, IndexError):
            continue
    return None


def source(cgroup_paths: list[str]) -> str:
    """What ``measure()``'s memory figure comes from for a sandbox with these groups (for the
    scorecard)."""
    memory = [p for p in cgroup_paths if "/memory/" in p or Path(p, "memory.peak").exists()]
    return "cgroup" if memory else "in-process"
