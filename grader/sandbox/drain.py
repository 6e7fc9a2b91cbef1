"""Wait until a killed sandbox's processes are really gone before the next one starts (trusted
side).

A killed namespace takes a moment to tear down (a fork bomb's 64 processes, a memory bomb's
gigabytes). A fresh worker started before that shares the slot's pids and memory cgroups with the
dying one and may fail to start at no fault of anyone's: the student must not lose a point for it.
"""

from __future__ import annotations

import os
import select
import signal
import time
from pathlib import Path

DRAIN_WAIT_S = 10.0
KILL_AFTER_S = 1.0
POLL_S = 0.05  # the longest wait between two looks at the groups


def wait_drained(
    groups: list[str], timeout: float = DRAIN_WAIT_S, kill_after: float = KILL_AFTER_S
) -> bool:
    """True once no process is left in ``groups``; False if some are still there after ``timeout``.

    Stragglers still there after ``kill_after`` seconds are killed (these groups are the grader's
    own).
    """
    start, exited = time.monotonic(), set[int]()
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
        if exited & set(pids):  # seen to exit, still listed: a pidfd would only say so again
            time.sleep(POLL_S)
            exited = set()
        else:
            exited = _until_one_exits(pids, POLL_S)


def members(groups: list[str]) -> list[int]:
    """Pids in the cgroups ``groups`` (a group that is gone counts as empty)."""
    pids: list[int] = []
    for group in groups:
        try:
            pids += [int(p) for p in (Path(group) / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            continue
    return pids


def _until_one_exits(pids: list[int], timeout: float) -> set[int]:
    """Wait until one of ``pids`` has exited (its pidfd turns readable: a teardown is waited for,
    not slept through), at most ``timeout`` seconds (asleep where the kernel gives no pidfd); the
    pids seen to exit."""
    fds: dict[int, int] = {}
    try:
        for pid in pids[:64]:  # a fork bomb's 64 processes at most: the groups' pids limit
            fds[os.pidfd_open(pid)] = pid
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN)
        return {fds[fd] for fd, _ in poller.poll(timeout * 1000)}
    except ProcessLookupError:
        return set()  # one is gone already: look at the groups again
    except (OSError, AttributeError):  # no pidfd (kernel < 5.3, not Linux)
        time.sleep(timeout)
        return set()
    finally:
        for fd in fds:
            os.close(fd)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
