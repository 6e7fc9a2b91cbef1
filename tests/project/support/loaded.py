"""A loaded machine, for the tests whose claim holds "even on a busy machine".

:func:`cpu_share` gives this process, and every process it starts meanwhile (the grade's trusted side, its
sandboxed workers, a zygote and what they fork), a fraction of one CPU, as other work on the machine would.
Where it can, it does so with a cgroup v1 CPU quota, which burns nothing: the busy loops it replaces took
70-80 CPU-seconds of the project's suite, half a core for the bomb tests' whole length, from the tests running
beside them. Where a quota could not hold the workers (cgroup v2 and a cpu hierarchy co-mounted with cpuacct:
the sandbox moves each worker into groups of its own there), this process is pinned to one CPU beside busy
loops, each in a session of its own as a worker is (the scheduler's autogroups then share the CPU among them).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CPU = Path("/sys/fs/cgroup/cpu")  # the cgroup v1 cpu hierarchy
PERIOD_US = 100_000


@contextmanager
def cpu_share(fraction: float) -> Iterator[str]:
    """``fraction`` (0-1) of one CPU for this process and all it starts inside the block; yields "quota" or
    "busy loops" (how). Start a zygote inside the block: its forks stay in the group it was started in."""
    group = _quota_group(fraction)
    if group is None:
        with _busy_loops(round(1 / fraction) - 1):
            yield "busy loops"
        return
    home = _own_group()
    (group / "cgroup.procs").write_text(
        str(os.getpid())
    )  # every thread of this process; children follow
    try:
        yield "quota"
    finally:
        (CPU / home.lstrip("/") / "cgroup.procs").write_text(str(os.getpid()))
        try:
            group.rmdir()
        except OSError:
            pass  # a process of the block still ending in it: the group is removed with the next one's parent


def _quota_group(fraction: float) -> Path | None:
    """A fresh v1 cpu group limited to ``fraction`` of a CPU; None where none can hold the sandbox's workers."""
    if (
        not (CPU / "cpu.cfs_quota_us").exists()
        or CPU.resolve() == Path("/sys/fs/cgroup/cpuacct").resolve()
    ):
        return None
    group = CPU / "attention-grader-tests" / f"loaded-{os.getpid()}"
    try:
        group.mkdir(parents=True, exist_ok=True)
        (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (group / "cpu.cfs_quota_us").write_text(str(int(PERIOD_US * fraction)))
    except OSError:
        return None
    return group


def _own_group() -> str:
    """This process's group in the v1 cpu hierarchy (from /proc/self/cgroup)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return path
    return "/"


@contextmanager
def _busy_loops(n: int) -> Iterator[None]:
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    busy = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
        for _ in range(n)
    ]
    try:
        yield
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
        os.sched_setaffinity(0, before)
