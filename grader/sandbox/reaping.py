"""Ending a worker from outside: signals that may find nobody, cgroups emptied and removed, exit
statuses said in words. Everything here is best effort by design: a process that is already gone is
the goal."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path


def kill_cgroups(groups: Iterable[str], *, rounds: int) -> None:
    """Kill what is left in each group (processes that left the process group with setsid), then
    remove the empty groups; a busy one (a namespace still tearing down) stays, and a later worker
    reuses it."""
    for group in groups:
        procs = Path(group) / "cgroup.procs"
        for _ in range(rounds):
            pids = [int(p) for p in procs.read_text().split()] if procs.exists() else []
            if not pids:
                break
            for pid in pids:
                quiet_signal(pid, signal.SIGKILL)
            time.sleep(0.02)
        remove_groups([group])


def remove_groups(groups: Iterable[str]) -> None:
    for group in groups:
        try:
            os.rmdir(group)
        except OSError:
            pass


def status(code: int | None) -> str:
    """A worker's exit code in words: ``killed by signal SIGKILL``, ``exit status 3``."""
    if (
        code is None
    ):  # only a wait(0) on a forked worker returns None; kept total for the type checker
        return "exit status unknown"
    if code < 0:
        return f"killed by signal {signal.Signals(-code).name}"
    if code > 128 and code - 128 in signal.Signals._value2member_map_:
        return f"killed by signal {signal.Signals(code - 128).name}"
    return f"exit status {code}"


def close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def quiet_signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
