"""Clean up after grader runs that could not clean up after themselves (SIGKILL, a crash, a power
cut).

Every temporary folder the trusted side makes is named ``grader-<kind>-<pid>-…`` (:func:`tempdir`),
and every cgroup ``attention-grader/p<pid>-…``. A run's own ``finally`` blocks and signal handlers
remove them; :func:`sweep` runs when ``grader grade``/``grader batch`` start and removes what a dead
run left: only entries owned by this user whose creating process is gone (and, for folders, that
are older than a minute, so a run that is still starting up is never touched).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from pathlib import Path

from grader import procs
from grader.sandbox import cgroups

PREFIX = "grader-"
_NAME = re.compile(r"^grader-[a-z]+-(\d+)-")
_CGROUP = re.compile(r"^p(\d+)-")
CGROUP_ROOTS = cgroups.SWEEP_ROOTS
MIN_AGE_S = 60.0
LEGACY_AGE_S = 6 * 3600.0


def tempdir(kind: str) -> Path:
    """A private temporary folder whose name says which process made it (for :func:`sweep`)."""
    return Path(tempfile.mkdtemp(prefix=f"{PREFIX}{kind}-{os.getpid()}-"))


def sweep(*, now: float | None = None) -> dict[str, int]:
    """Remove what dead grader runs left behind; return how many folders and cgroups went."""
    from grader.sandbox import mirror

    return {
        "folders": _sweep_folders(now or time.time()) + mirror.sweep(),
        "cgroups": _sweep_cgroups(),
    }


def _sweep_folders(now: float) -> int:
    removed = 0
    base = Path(tempfile.gettempdir())
    for entry in base.glob(f"{PREFIX}*"):
        match = _NAME.match(entry.name)
        try:
            info = entry.lstat()
        except OSError:
            continue
        age = now - info.st_mtime
        if entry.is_symlink() or info.st_uid != os.getuid() or age < MIN_AGE_S:
            continue
        if (match is not None and procs.alive(int(match.group(1)))) or (
            match is None and not _legacy(entry.name, age)
        ):
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed += 1
    return removed


def _legacy(name: str, age: float) -> bool:
    """A folder from a grader version that did not name its pid: judged by age alone."""
    return (
        name.startswith(("grader-root-", "grader-submission-", "grader-warm-"))
        and age > LEGACY_AGE_S
    )


def _sweep_cgroups() -> int:
    removed = 0
    for root in CGROUP_ROOTS:
        for group in sorted(root.glob("p*"), reverse=True) if root.is_dir() else []:
            match = _CGROUP.match(group.name)
            if match is None or procs.alive(int(match.group(1))):
                continue
            removed += _remove_cgroup(group)
    return removed


def _remove_cgroup(group: Path) -> int:
    """Kill what is left inside (a dead run's sandbox), then remove the group; 1 if it went."""
    from grader.sandbox import drain

    drain.wait_drained([str(group)], timeout=1.0, kill_after=0.0)
    try:
        group.rmdir()
    except OSError:
        return 0
    return 1
