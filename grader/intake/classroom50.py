"""The folder ``gh teacher download`` (Classroom 50) writes: whose repository is which.

:func:`download_entries` yields (login, repository folder) for the folder ``gh teacher download``
writes: ``<classroom>-<assignment>_submissions_<timestamp>/<classroom>-<assignment>-<login>/`` with
``scores.csv`` at its root, or with ``-d DIR --by-pattern`` the same repositories in ``DIR`` with no
``scores.csv``: the login is then what follows ``-<assignment>-``, as the timestamped folder's
prefix gives it.
"""

from __future__ import annotations

import csv
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

DOWNLOAD_NAME = re.compile(r"^(?P<prefix>.+)_submissions_\d{4}_\d{2}_\d{2}_T_\d{2}_\d{2}_\d{2}$")


def _lmode(path: Path) -> int:
    try:
        return os.lstat(path).st_mode
    except OSError:
        return 0


def _repos(root: Path) -> list[Path]:
    """Every entry but regular files (scores.csv): folders, and links or devices for the caller to
    refuse."""
    return sorted(
        p
        for p in root.iterdir()
        if not p.name.startswith((".", "__")) and not stat.S_ISREG(_lmode(p))
    )


def _logins(root: Path) -> list[str]:
    try:
        with (root / "scores.csv").open(newline="", encoding="utf-8-sig") as fh:
            return [
                row["username"].strip()
                for row in csv.DictReader(fh)
                if (row.get("username") or "").strip()
            ]
    except (OSError, KeyError, csv.Error, UnicodeDecodeError):
        return []


def is_download(root: Path, assignment: str | None = None) -> bool:
    """``root`` looks like what ``gh teacher download`` wrote: its name, ``scores.csv``, or (``-d
    DIR --by-pattern``, which writes neither) repositories all named
    ``<classroom>-<assignment>-<login>``."""
    root = Path(root)
    if not stat.S_ISDIR(_lmode(root)):
        return False
    repos = [p for p in _repos(root) if stat.S_ISDIR(_lmode(p))]
    if not any(stat.S_ISDIR(_lmode(p / "exercises")) for p in repos):
        return False
    if DOWNLOAD_NAME.match(root.name) is not None or _logins(
        root
    ):  # `-d DIR` keeps the name literal
        return True
    return assignment is not None and all(_by_pattern(p.name, assignment) for p in _repos(root))


def _by_pattern(name: str, assignment: str) -> str | None:
    """The login in ``<classroom>-<assignment>-<login>`` (the first ``-<assignment>-`` in the name),
    else None."""
    found = re.match(rf"^.+?-{re.escape(assignment.lower())}-(?P<login>.+)$", name.lower())
    return name[found.start("login") :] if found else None


def download_entries(root: Path, assignment: str | None = None) -> Iterator[tuple[str, Path]]:
    """(login, repository folder) for each entry of a ``gh teacher download`` folder, links included
    (never followed here: the caller refuses them). The login is the repository name without the
    ``<classroom>-<assignment>-`` prefix: matched against ``scores.csv`` when present, else the
    prefix the folder's name gives, else (``--by-pattern`` into a folder of any name) what follows
    ``-<assignment>-``."""
    root = Path(root)
    named = DOWNLOAD_NAME.match(root.name)
    prefix = named["prefix"].lower() + "-" if named else ""
    logins = sorted(
        _logins(root), key=len, reverse=True
    )  # the longest login that ends the name wins
    for repo in _repos(root):
        name = repo.name.lower()
        login = next((u for u in logins if name.endswith("-" + u.lower())), None)
        if login is None and prefix and name.startswith(prefix) and len(name) > len(prefix):
            login = repo.name[len(prefix) :]
        if login is None and assignment:
            login = _by_pattern(repo.name, assignment)
        yield login or repo.name, repo
