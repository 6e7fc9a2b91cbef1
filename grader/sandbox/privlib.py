"""The sandbox side's own library folder: the only part of ``grader`` a worker or a zygote has on
its path.

A worker used to get the grader's folder (the checkout: ``solutions/``, ``tests/hidden/``, the whole
trusted ``grader``) as the first entry of its ``sys.path`` under every level but ``namespace``. Now
every launcher, zygote and worker runs from a copy holding only what runs on the far side of the
wall: ``grader/inside``, ``grader/protocol`` and the stdlib-only launch modules of
``grader/sandbox``. The copy also makes the sandbox independent of where the checkout lives (a
leased uid cannot enter a 0700 home folder, but can read this one).

The folder is named after a digest of its content and is never changed once made (built beside
it, then renamed into place), so a long-lived zygote started from one copy keeps working while a
newer grader makes another. It lives in a folder only its owner can write (``/run`` for root,
else the temporary folder), checked for links and foreign owners like the uid lease folder.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from grader import procs
from grader.errors import GraderFault

GRADER = Path(__file__).resolve().parents[1]  # the `grader` package
PACKAGES = ("inside", "protocol")
LAUNCH_MODULES = (
    "launcher.py",
    "seccomp.py",
    "workerenv.py",
    "zygote.py",
    "zygote_proxy.py",
    "landlock.py",
    "privileges.py",
    "rootfs.py",
)


class PrivateLibError(GraderFault):
    """No safe folder for the sandbox's library could be made."""


def sources() -> list[tuple[str, Path]]:
    """(path inside the copy, source file) for everything the copy holds, sorted."""
    found = [(f"grader/sandbox/{name}", GRADER / "sandbox" / name) for name in LAUNCH_MODULES]
    for package in PACKAGES:
        found += [
            (f"grader/{package}/{p.relative_to(GRADER / package).as_posix()}", p)
            for p in (GRADER / package).rglob("*.py")
        ]
    return sorted(found)


@functools.cache
def ensure() -> Path:
    """The folder to put on a sandbox's ``sys.path`` (made now if this content has none yet)."""
    files = [(name, path.read_bytes()) for name, path in sources()]
    digest = hashlib.sha256(b"".join(n.encode() + b"\0" + d + b"\0" for n, d in files)).hexdigest()[
        :20
    ]
    parent = _parent()
    target = parent / digest
    if not target.is_dir():
        _build(parent, target, files)
    return target


def _parent() -> Path:
    candidates = [Path(tempfile.gettempdir()) / f"attention-grader-lib-{os.geteuid()}"]
    if os.geteuid() == 0:
        candidates.insert(0, Path("/run/attention-grader/lib"))
    found = procs.own_folder(candidates, 0o755)
    if found is not None:
        found.chmod(0o755)  # others (the leased uids) pass through and read; only we write
        return found
    raise PrivateLibError(
        f"no safe folder for the sandbox's library among {', '.join(map(str, candidates))}"
    )


def _build(parent: Path, target: Path, files: list[tuple[str, bytes]]) -> None:
    staging = Path(tempfile.mkdtemp(prefix=".build-", dir=parent))
    try:
        for name, data in files:
            dest = staging / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
        (staging / "grader" / "__init__.py").write_text(
            '"""The sandbox side of the grader (a copy)."""\n'
        )
        for folder, _dirs, names in os.walk(staging):
            os.chmod(folder, 0o755)
            for name in names:
                os.chmod(os.path.join(folder, name), 0o644)
        os.rename(staging, target)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        if not target.is_dir():  # another process made the same copy first: that one will do
            raise PrivateLibError(f"cannot make the sandbox's library in {parent}: {exc}") from None


def launcher() -> Path:
    """The launcher every cold worker starts through: this library's copy of it."""
    return ensure() / "grader" / "sandbox" / "launcher.py"
