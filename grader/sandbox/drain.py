"""Wait until a killed sandbox's processes are really gone before the next one starts (trusted
side).

A killed namespace takes a moment to tear down (a fork bomb's 64 processes, a memory bomb's
gigabytes). A fresh worker started before that shares the slot's pids and memory cgroups with the
dying one and may fail to start at no fault of anyone's: the student must not lose a point for it.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

DRAIN_WAIT_S = 10.0
KILL_AFTER_S = 1.0


def wait_drained(
    groups: list[str], timeout: float = DRAIN_WAIT_S, kill_after: float = KILL_AFTER_S
) -> bool:
    """True once no process is left in ``groups``; False if some are still there after ``timeout``.

    Stragglers still there after ``kill_after`` seconds are killed (these groups are the grader's
    own).
    """
    start = time.monotonic()
    while True:
        pids = members(groups)
        waited = time.monotonic() - start
        if not pids:
            return True
        if waited >= timeout:
            return False
        if waited >= kill_after:
            for pid in pids:
                _kill(pid)
        time.sleep(0.05)


def members(groups: list[str]) -> list[int]:
    """Pids in the cgroups ``groups`` (a group that is gone counts as empty)."""
    pids: list[int] = []
    for group in groups:
        try:
            pids += [int(p) for p in (Path(group) / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            continue
    return pids


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
