"""The sandbox's control groups (trusted side): per-slot memory and pids limits, on cgroup v1 or v2.

The kernel's accounting is what holds a sandbox from outside: memory that escapes the rlimits
(tmpfs, kernel memory, shared anonymous mappings where a GPU forces RLIMIT_DATA in place of
RLIMIT_AS), every thread and process it makes, and the figure ``measure()`` reads from outside
(:mod:`memwatch`).

- cgroup v1 (separate hierarchies, this project's CI machines): one group per controller,
  ``/sys/fs/cgroup/<controller>/attention-grader/p<pid>-slot-<n>``.
- cgroup v2 (unified; most current distributions and the GPU hosts seen here): one group,
  ``/sys/fs/cgroup/attention-grader/p<pid>-slot-<n>``, holding memory, pids and ``cpu.stat``; the
  ``attention-grader`` parent gets the memory and pids controllers delegated to its children.

Groups are named after the grader process that made them, so two grader runs never share one and
:mod:`sweep` can remove what a dead run left. Where no group can be made (not root, a container
without delegation), the list is empty and the rlimits alone hold the sandbox; the scorecard says
so.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
PARENT = "attention-grader"
V1_CONTROLLERS = ("memory", "pids")
SWEEP_ROOTS = (
    *(ROOT / c / PARENT for c in ("memory", "pids", "cpuacct", "cpu,cpuacct")),
    ROOT / PARENT,
)
# above the worker's own cap: the launcher, page cache of the submission, the interpreter
HEADROOM_MB = 512


def unified() -> bool:
    """Whether /sys/fs/cgroup is a cgroup v2 (unified) hierarchy."""
    return (ROOT / "cgroup.controllers").exists()


def slot_groups(slot: int, *, memory_mb: int, processes: int) -> list[str]:
    """This grader process's groups for a launch slot, made (or reused) with the slot's limits; []
    if none."""
    name = f"p{os.getpid()}-slot-{slot}"
    settings = {"memory": str((memory_mb + HEADROOM_MB) << 20), "pids": str(processes)}
    return _v2_group(name, settings) if unified() else _v1_groups(name, settings)


def _v1_groups(name: str, settings: dict[str, str]) -> list[str]:
    made = []
    files = {"memory": "memory.limit_in_bytes", "pids": "pids.max"}
    for controller, value in settings.items():
        path = ROOT / controller / PARENT / name
        try:
            path.mkdir(parents=True, exist_ok=True)
            (path / files[controller]).write_text(value)
        except OSError:
            continue
        made.append(str(path))
    return made


def _v2_group(name: str, settings: dict[str, str]) -> list[str]:
    """One v2 group with memory.max, memory.swap.max = 0 and pids.max; [] unless all of them could
    be set."""
    path = ROOT / PARENT / name
    try:
        _delegate(ROOT / PARENT)
        path.mkdir(exist_ok=True)
        (path / "memory.max").write_text(settings["memory"])
        (path / "pids.max").write_text(settings["pids"])
        if (path / "memory.swap.max").exists():
            (path / "memory.swap.max").write_text("0")
    except OSError:
        return []
    return [str(path)]


def _delegate(parent: Path) -> None:
    """Make ``parent`` (an empty group below the root) and hand the memory and pids controllers to
    its children.

    The root group may enable controllers for its children while it holds processes; ``parent``
    holds none, so the kernel's "no internal processes" rule is kept. Raises OSError where this is
    not allowed."""
    wanted = {"memory", "pids"}
    if not wanted <= set((ROOT / "cgroup.controllers").read_text().split()):
        raise OSError("the memory and pids controllers are not available here")
    if not wanted <= set((ROOT / "cgroup.subtree_control").read_text().split()):
        (ROOT / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in sorted(wanted)))
    parent.mkdir(exist_ok=True)
    if not wanted <= set((parent / "cgroup.subtree_control").read_text().split()):
        (parent / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in sorted(wanted)))


def cpu_group(groups: list[str]) -> str | None:
    """The v2 group among ``groups`` whose ``cpu.stat`` gives the sandbox's CPU time (v1 uses
    cpuacct)."""
    return next((g for g in groups if Path(g, "cpu.stat").exists()), None)
