"""Nothing a ``process`` or ``none`` sandbox started or wrote outlives it.

``namespace`` gets this from the kernel: killing pid 1 of its pid namespace kills every process in
it, and its ``/tmp`` is a tmpfs that goes with its mount namespace. The levels without namespaces
share the machine's process table and folders, so a submission could leave a daemon (``setsid``
and a double fork leave the process group the runner kills) or files in ``/tmp`` and ``/dev/shm``
for the next grade run under the same leased uid to find. Here, every sandbox gets a scratch folder
of its own (its ``TMPDIR``, the only writable place under Landlock), and when it ends, before its
scorecard is written: every process of its leased uid is killed, the scratch folder removed, and,
where no Landlock view kept it from writing elsewhere, every file of that uid in the machine's
world-writable folders removed too.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from grader.sandbox import sweep, uids
from grader.sandbox.isolation import LaunchSpec

SHARED = (
    "/tmp",
    "/var/tmp",
    "/dev/shm",
)  # world-writable folders a uid with no home can write into
MAX_DEPTH = 8


def scratch(launch: LaunchSpec) -> Path | None:
    """A new scratch folder for one ``process``/``none`` worker (None for the namespace levels):
    ours, with a ``tmp`` inside owned by the worker's uid, private to it."""
    if launch.backend not in ("process", "none"):
        return None
    holder = sweep.tempdir("scratch")  # named after us, so a run that dies leaves it for the sweep
    holder.chmod(0o711)
    inner = holder / "tmp"
    inner.mkdir(mode=0o700)
    if launch.drops_uid:
        os.chown(inner, launch.uid, launch.uid)
    return inner


def clear(launch: LaunchSpec, inner: Path | None) -> None:
    """After the worker was killed: its uid's processes, its scratch folder, and its files
    elsewhere."""
    if launch.drops_uid:
        uids.clear(launch.uid)
    if inner is not None:
        shutil.rmtree(inner.parent, ignore_errors=True)
    if launch.drops_uid and launch.file_view in ("permissions", "none"):
        for folder in SHARED:
            remove_owned(Path(folder), launch.uid)


def remove_owned(folder: Path, uid: int, depth: int = 0) -> int:
    """Remove every entry below ``folder`` owned by ``uid``; descend only into folders others may
    write to (the only ones a uid without a home can have written into). Returns how many entries
    went."""
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if info.st_uid == uid:
            _remove(Path(entry.path), info)
            removed += 1
        elif stat.S_ISDIR(info.st_mode) and info.st_mode & 0o002 and depth < MAX_DEPTH:
            removed += remove_owned(Path(entry.path), uid, depth + 1)
    return removed


def _remove(path: Path, info: os.stat_result) -> None:
    try:
        if stat.S_ISDIR(info.st_mode):
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink()
    except OSError:
        pass
