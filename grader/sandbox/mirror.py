"""What a leased uid needs but cannot reach (torch in a venv under a 0700 folder), linked where it
can.

A root grader's workers run as leased uids. Under ``process`` and ``none`` they read torch and its
closure through the machine's own folders, so a venv inside a folder closed to other users (a 0700
home, a ``mktemp -d`` checkout) stopped every worker at its first import. Here each site folder a
leased uid cannot reach gets a mirror: a tree of hard links to the same files (nothing is copied,
every file keeps its own permissions), holding only torch's closure, in a folder any user may enter,
on the same filesystem. It is named after the distributions it holds (their names, versions and
RECORDs), built beside its final name and renamed into place, never changed; every level's workers
and zygotes of this grader then see torch there (``namespace`` binds the mirror's entries as it
binds the originals). Where no mirror can be made (another filesystem), :func:`site_dirs` keeps the
original and the grade is refused with the reason
(:func:`grader.sandbox.view.unreadable_for_workers`).
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from grader import procs
from grader.sandbox import view

SOURCE = ".source"  # in each mirror: the site folder it mirrors (for sweep)


@functools.cache
def mapping() -> dict[str, str]:
    """{original site folder: its mirror} for every site folder a root grader's leased uids cannot
    reach."""
    if os.name != "posix" or os.geteuid() != 0:
        return {}
    found = {}
    for site in view.site_dirs():
        if not view.reachable(site):
            mirrored = _mirror(site)
            if mirrored is not None:
                found[site] = mirrored
    return found


def unreachable() -> list[str]:
    """What a leased uid needs but cannot read without a view of its own: a runnable interpreter of
    this version, torch and its closure (mirrors included)."""
    missing = [] if view.worker_python() else [view.interpreter()]
    return missing + [p for p in (*site_dirs(), *packages()) if not view.reachable(p)]


def site_dirs() -> list[str]:
    """The site folders as workers see them: the mirrors in place of the unreachable originals."""
    return [mapping().get(site, site) for site in view.site_dirs()]


def packages() -> list[str]:
    """torch's closure entries as workers see them (under the mirrors where there are some)."""
    return [_moved(path) for path in view.packages()]


def prepare() -> None:
    """Compute now, in this thread, what a worker's launch configuration reads from this machine
    (torch's closure from its RECORDs: 50-90 ms, cached for the process). A worker started on
    another thread (:class:`grader.sandbox.warm.WarmStart`) would otherwise compute it there, slowed
    several times by this thread's own work (``import torch``), and start that much later."""
    view.interpreter()
    view.masks(False)
    packages()
    site_dirs()


def _moved(path: str) -> str:
    for site, mirrored in mapping().items():
        if path.startswith(site.rstrip("/") + "/"):
            return mirrored + path[len(site.rstrip("/")) :]
    return path


def _entries(site: str) -> list[str]:
    return [p for p in view.packages() if os.path.dirname(p) == site]


def _mirror(site: str) -> str | None:
    entries = _entries(site)
    digest = hashlib.sha256(site.encode())
    for entry in entries:
        record = Path(entry, "RECORD")
        digest.update(
            entry.encode()
            + (
                record.read_bytes()
                if record.is_file()
                else str(os.stat(entry).st_mtime_ns).encode()
            )
        )
    parent = procs.own_folder(
        [Path(tempfile.gettempdir()) / f"attention-grader-mirror-{os.geteuid()}"], 0o755
    )
    if parent is None or os.stat(parent).st_dev != os.stat(site).st_dev:
        return None  # hard links cannot cross filesystems: the grade is refused instead
    parent.chmod(0o755)
    target = parent / digest.hexdigest()[:20]
    if not target.is_dir():
        try:
            _build(parent, target, entries)
        except OSError:
            return None
    return str(target)


def _build(parent: Path, target: Path, entries: list[str]) -> None:
    staging = Path(tempfile.mkdtemp(prefix=".build-", dir=parent))
    try:
        for entry in entries:
            link_tree(entry, staging / os.path.basename(entry))
        (staging / SOURCE).write_text(os.path.dirname(entries[0]) if entries else "")
        staging.chmod(0o755)
        os.rename(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # gone already once renamed


def sweep(*, keep_s: float = 3600.0) -> int:
    """Remove the mirrors no grader needs: their site folder is gone, or a newer mirror of it is
    over ``keep_s`` old (a mirror holds its files' data alive after their venv is deleted or
    upgraded). Returns how many went."""
    parent = (
        Path(tempfile.gettempdir())
        / f"attention-grader-mirror-{os.geteuid() if os.name == 'posix' else 0}"
    )
    by_source: dict[str, list[Path]] = {}
    for folder in parent.glob("[0-9a-f]*") if parent.is_dir() else []:
        try:
            by_source.setdefault((folder / SOURCE).read_text(), []).append(folder)
        except OSError:
            continue
    removed = 0
    for source, folders in by_source.items():
        folders.sort(key=lambda f: f.stat().st_mtime, reverse=True)
        stale = (
            folders
            if not os.path.isdir(source)
            else [f for f in folders[1:] if _age(folders[0]) > keep_s]
        )
        for folder in stale:
            shutil.rmtree(folder, ignore_errors=True)
            removed += 1
    return removed


def _age(folder: Path) -> float:
    return time.time() - folder.stat().st_mtime


def link_tree(source: str, dest: Path, *, skip: Sequence[str] = ()) -> None:
    """``source`` (a file or a folder) again at ``dest`` as hard links: nothing copied, every file
    keeps its own permissions, every folder 0755 (any user may enter it); names that match a pattern
    of ``skip`` (fnmatch) are left out at any depth, a folder with all below it. ``dest``'s parent
    must exist, on the same filesystem."""
    if not os.path.isdir(source):
        os.link(source, dest)
        return
    for folder, dirs, files in os.walk(source):
        dirs[:] = [d for d in dirs if not _skipped(d, skip)]
        here = dest / os.path.relpath(folder, source)
        here.mkdir(mode=0o755, exist_ok=True)
        here.chmod(0o755)
        for name in files:
            if not _skipped(name, skip):
                os.link(os.path.join(folder, name), here / name, follow_symlinks=False)


def _skipped(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in patterns)
