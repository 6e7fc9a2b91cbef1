"""Intake's file-system layer: look at a submission without ever following a link or opening a
special file.

A submission is hostile input. A symlink (``exercises -> /proc/self/cwd/solutions``, or
``-> ../alice/exercises``) would make the grader read someone else's files as the student's; a FIFO
named ``x.zip`` would hang the ``open()``; a device may do anything when opened. So everything here
uses ``lstat`` (``os.scandir`` with ``follow_symlinks=False``; note ``Path.is_dir()``/``is_file()``
follow links), opens with ``O_NOFOLLOW | O_NONBLOCK`` and re-checks the open file with ``fstat``.
Names that reach a message go through :func:`grader.safetext.name` first.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from grader import safetext
from grader.errors import SubmissionError

# One size budget: the sandbox's ``/box`` (a tmpfs of BOX_BYTES and BOX_INODES under `namespace`)
# holds the submission's modules and whatever its code writes while it runs. Intake admits modules
# of at most half of it, counted as tmpfs counts them (whole pages), so copying them in can never
# fail: a submission that does not fit is refused here, as the student's, never found at sandbox
# set-up as a grader fault.
BOX_BYTES = 64 << 20
BOX_INODES = 4096
PAGE_BYTES = 4096
MAX_SUBMISSION_BYTES = BOX_BYTES // 2  # every module together, each rounded up to whole pages
MAX_FILES = 200  # Python files taken from one submission (far below BOX_INODES)
MAX_FILE_BYTES = 1 << 20  # one module
MAX_MEMBERS = 1000  # archive members
MAX_TOTAL_BYTES = 64 << 20  # an archive unpacked, or one notebook
MAX_RATIO = 100  # compression ratio of one zip member
MAX_WALK = 10_000  # entries walked in a submission folder
MAX_NAME_CHARS = 1024  # one archive member's path
# folders a student's tools make (a virtual environment's links, caches, git's objects): never read,
# never refused
TOOL_FOLDERS = frozenset(
    {
        ".venv",
        "venv",
        "__pycache__",
        ".git",
        ".pytest_cache",
        ".ipynb_checkpoints",
        ".mypy_cache",
        ".ruff_cache",
        "__MACOSX",
    }
)

_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


class IntakeError(SubmissionError):
    """The submission cannot be graded as given; the message says why and what to send instead."""


def label(path: Path | str) -> str:
    """A file name fit for a message: no control characters, no lone surrogates, capped."""
    return safetext.name(Path(path).name or str(path))


def special(mode: int) -> str:
    """What a non-regular, non-folder entry is (``""`` for a regular file or a folder)."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return ""
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file"


def refuse(shown: str, what: str) -> IntakeError:
    return IntakeError(
        f"{shown}: is {what}; submit regular files and folders only (links are never followed)"
    )


def lstat(path: Path) -> os.stat_result:
    """``os.lstat``, with a missing path as an :class:`IntakeError`."""
    try:
        return os.lstat(path)
    except OSError as exc:
        raise IntakeError(
            f"submission not found or unreadable: {safetext.name(path, 1000)} "
            f"({exc.strerror or type(exc).__name__})"
        ) from None


Signature = tuple[str, int, int, int, int]


def signature(path: Path) -> Signature | None:
    """What tells that a file changed without reading it: its path, mtime, ctime, size and inode
    (None: it is not there). A memo keyed on it is read again after a write, a rename over the file
    or a touch; the grader's own memos of files it reads often (the proof, the suites) use it."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (str(path), st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


def check_tree(root: Path) -> None:
    """Refuse ``root`` or anything under it that is a link, FIFO, socket or device (capped walk);
    whatever is inside a tool's folder (:data:`TOOL_FOLDERS`) is left alone, as intake never reads
    it."""
    mode = lstat(root).st_mode
    if special(mode):
        raise refuse(label(root), special(mode))
    if not stat.S_ISDIR(mode):
        return
    stack, seen = [root], 0
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                seen += 1
                if entry.name in TOOL_FOLDERS:
                    # never read: a .venv's links to its interpreter are not the student's code
                    continue
                if seen > MAX_WALK:
                    raise IntakeError(
                        f"{label(root)}: more than {MAX_WALK} files and folders; "
                        "submit only your code (no virtual environments or data sets)"
                    )
                mode = entry.stat(follow_symlinks=False).st_mode
                if special(mode):
                    raise refuse(
                        safetext.name(os.path.relpath(entry.path, root), 1000), special(mode)
                    )
                if stat.S_ISDIR(mode):
                    stack.append(Path(entry.path))


def is_dir(path: Path) -> bool:
    """A real folder (a link to one is not)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def regular_files(folder: Path, suffix: str) -> list[Path]:
    """The regular files (never links) directly in ``folder`` whose name ends with ``suffix``,
    sorted."""
    with os.scandir(folder) as entries:
        found = [
            Path(e.path)
            for e in entries
            if e.name.endswith(suffix) and stat.S_ISREG(e.stat(follow_symlinks=False).st_mode)
        ]
    return sorted(found)


def open_regular(path: Path) -> BinaryIO:
    """Open a regular file for reading; a link, FIFO or device is refused before anything blocks."""
    what = special(lstat(path).st_mode)
    if what:
        raise refuse(label(path), what)
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        raise IntakeError(
            f"{label(path)}: cannot be opened ({exc.strerror or type(exc).__name__})"
        ) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):  # swapped between lstat and open
        os.close(fd)
        raise refuse(label(path), special(mode) or "not a regular file")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_regular(path: Path, limit: int) -> bytes:
    """The bytes of regular file ``path``, refusing more than ``limit``."""
    with open_regular(path) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise IntakeError(f"{label(path)}: larger than {_size(limit)}")
    return data


class Box:
    """The staging folder the sandbox's ``/box`` is filled from: modules written within the one size
    budget."""

    def __init__(self, path: Path) -> None:
        self.path, self.used = path, 0

    def write(self, name: str, data: bytes) -> None:
        """Write module ``name`` (our own folder: no link can be there), refusing past
        :data:`MAX_SUBMISSION_BYTES`."""
        self.used += -(-len(data) // PAGE_BYTES) * PAGE_BYTES
        if self.used > MAX_SUBMISSION_BYTES:
            raise IntakeError(
                f"its Python files come to more than {MAX_SUBMISSION_BYTES >> 20} MiB, more than the "
                "sandbox can hold; submit only your own modules"
            )
        dst = self.path / name
        dst.write_bytes(data)
        dst.chmod(0o644)


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"
