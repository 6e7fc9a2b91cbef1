"""Machine-wide uid leases: no two live sandboxes on this machine ever share a uid.

RLIMIT_NPROC, signals and ``/proc`` access all go by uid across the whole machine, so a fixed
``60000 + slot`` let one grader run's submission park processes that starved a concurrent run's
honest student (sandbox.md §8.2). A lease is an ``fcntl.flock`` on ``<dir>/<uid>`` held by the
trusted process for the lease's life: a holder that dies releases it automatically. Before a uid
is handed out, every process still running under it (a dead holder's leftovers) is killed.

Within one trusted process, a launch ``slot`` ("lane") keeps its uid until the process ends: every
spec for that slot shares it, two slots never do.
"""

from __future__ import annotations

import fcntl
import os
import pwd
import signal
import threading
import time
import weakref
from pathlib import Path

from grader import procs
from grader.errors import GraderFault

FIRST, COUNT = 60000, 5000
LEASE_DIRS = (Path("/run/attention-grader/uids"), Path("/tmp/attention-grader-uids"))
CLEAR_WAIT_S = 3.0


class UidLeaseError(GraderFault):
    """No uid of the range could be leased (all held, or leftovers that would not die)."""


class Lease:
    """One leased uid; released by :meth:`release`, by garbage collection, or by the holder's
    death."""

    def __init__(self, uid: int, fd: int) -> None:
        self.uid, self._fd = uid, fd
        self._finalizer = weakref.finalize(self, os.close, fd)

    def release(self) -> None:
        self._finalizer()

    @property
    def held(self) -> bool:
        return self._finalizer.alive


_by_slot: dict[int, Lease] = {}
_lock = threading.Lock()


def lease_for_slot(slot: int) -> Lease:
    """This process's lease for ``slot``, taken on first use and kept until the process ends.

    Kept, not retaken per sandbox: the previous sandbox of a slot is still being reaped when the
    next starts, and clearing its stragglers cost 1.4-1.9 s per worker (measured); within this
    process they are ours, and the runner kills each sandbox whole, as it did with fixed uids.
    """
    with _lock:
        lease = _by_slot.get(slot)
        if lease is None or not lease.held:
            lease = _by_slot[slot] = acquire()
        return lease


def forget() -> None:
    """In a forked copy of a trusted process: drop the leases inherited from the parent (``flock``
    is shared across fork, so the copy would otherwise use the parent's uids beside it); the copy
    leases its own on first use. The parent's locks stay held by the parent's descriptors."""
    with _lock:
        leases = list(_by_slot.values())
        _by_slot.clear()
    for lease in leases:
        lease.release()  # closes the copy's duplicate descriptor only


def acquire(directory: Path | None = None, first: int = FIRST, count: int = COUNT) -> Lease:
    """Lease the lowest free uid of ``[first, first + count)`` whose leftover processes are all
    gone."""
    where = directory or lease_dir()
    for uid in range(first, first + count):
        if _has_account(uid):
            continue  # a real account's uid: never ours to hand out (or to clear)
        fd = _try_lock(where / str(uid))
        if fd is None:
            continue
        if clear(uid):
            return Lease(uid, fd)
        os.close(fd)  # unkillable leftovers (zombies not yet reaped): leave this uid for later
    raise UidLeaseError(
        f"no free sandbox uid in {first}-{first + count - 1} (leases under {where})"
    )


def lease_dir() -> Path:
    """The first usable lease folder: ours (same owner), not a symlink, closed to everyone else."""
    found = procs.own_folder(LEASE_DIRS, 0o700)
    if found is not None:
        return found
    raise UidLeaseError(f"no usable uid lease folder among {', '.join(map(str, LEASE_DIRS))}")


def _has_account(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


def _try_lock(path: Path) -> int | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def clear(uid: int, wait_s: float = CLEAR_WAIT_S) -> bool:
    """Kill every process running under ``uid``; True once none is left (zombies count until
    reaped)."""
    deadline = time.monotonic() + wait_s
    while True:
        alive = processes_of(uid)
        if not alive:
            return True
        if time.monotonic() > deadline:
            return False
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.02)


def processes_of(uid: int) -> list[int]:
    """Pids whose real, effective, saved or filesystem uid is ``uid`` (from /proc/*/status)."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and uid in _uids(entry.path):
            found.append(int(entry.name))
    return found


def _uids(proc_dir: str) -> set[int]:
    try:
        with open(f"{proc_dir}/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Uid:"):
                    return {int(v) for v in line.split()[1:]}
    except OSError:
        pass  # the process ended while we looked
    return set()
