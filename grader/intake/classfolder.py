"""Find the submissions in a class folder and the student id of each, from the layout.

Layouts (checked in this order):

- nbgrader: ``submitted/<student>/<assignment>/`` (the folder given is ``submitted`` or its parent);
- GitHub Classroom clone: ``<assignment>-submissions/<login>/`` holding each student's repo with
  ``exercises/`` (a ``<assignment>-`` prefix on the repo folder is dropped from the login);
- a plain class folder: per-student folders, ``.zip``/``.tar.gz``/``.tgz`` archives, single
  ``alice.py`` files (and ``.ipynb`` notebooks, which intake decides about).

Ids are made safe as file names (the key) and as text (the id shown, via :mod:`grader.safetext`).
Two entries claiming one id are a *clash*: each clashing entry is kept, under a distinct key, with
``clash`` set, so the engine gives it an intake-error scorecard. An entry that is a symlink, FIFO,
socket or device is never followed or opened (everything here uses ``lstat``): it is kept with
``clash`` saying so.
"""

from __future__ import annotations

import os
import re
import stat
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from grader import safetext
from grader.errors import UsageError
from grader.intake import classroom50
from grader.safefs import special

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".zip")
FILE_SUFFIXES = (*ARCHIVE_SUFFIXES, ".py", ".ipynb")
_UNSAFE = re.compile(r"[^A-Za-z0-9._@+-]")


class DiscoveryError(UsageError):
    """The submissions folder cannot be read as a class (message says what to give instead)."""


@dataclass(frozen=True)
class Entry:
    """One submission to grade: ``key`` names its scorecard file, ``student`` is the id shown."""

    key: str
    student: str
    path: Path
    layout: str
    clash: str = ""  # why this entry cannot be graded (id clash, link, device): empty when fine


@dataclass(frozen=True)
class Discovery:
    entries: list[Entry]
    layout: str
    ignored: list[str]


def safe_id(name: str) -> str:
    """A student id usable as a file name (no separators, no leading dot)."""
    cleaned = _UNSAFE.sub("_", name).lstrip(".") or "_"
    return cleaned[:120]


def discover(root: Path | str, *, assignment: str | None = None) -> Discovery:
    """List the submissions under ``root`` (see module docstring); raise :class:`DiscoveryError`."""
    root = Path(root)
    if not root.is_dir():
        raise DiscoveryError(
            f"{root}: not a folder (give the folder that holds the class's submissions)"
        )
    nb = _nbgrader_root(root)
    ignored: list[str]
    if nb is not None:
        found, ignored, layout = _nbgrader(nb, assignment), [], "nbgrader"
    elif classroom50.is_download(root, assignment):  # `gh teacher download` (Classroom 50)
        found = [
            (login, path, "classroom50", _refused(path))
            for login, path in classroom50.download_entries(root, assignment)
        ]
        ignored, layout = [], "classroom50"
    elif _is_classroom(root):
        found, ignored, layout = _classroom(root), [], "github-classroom"
    else:
        found, ignored = _plain(root)
        layout = "folder"
    return Discovery(_resolve_clashes(found), layout, ignored)


Found = tuple[str, Path, str, str]  # raw id, path, layout, why it cannot be graded ("" when fine)


def _visible(folder: Path) -> list[Path]:
    return sorted(
        p for p in folder.iterdir() if not p.name.startswith((".", "__MACOSX", "__pycache__"))
    )


def _mode(path: Path) -> int:
    """``lstat`` mode (0 when it vanished): a link is a link, whatever it points to."""
    try:
        return os.lstat(path).st_mode
    except OSError:
        return 0


def _is_dir(path: Path) -> bool:
    return stat.S_ISDIR(_mode(path))


def _refused(path: Path) -> str:
    """Why ``path`` is refused unopened (a link, FIFO, socket or device), else ``""``."""
    what = special(_mode(path))
    return (
        (
            f"{safetext.name(path.name)}: is {what}; submit regular files and folders only "
            "(links are never followed)"
        )
        if what
        else ""
    )


def _nbgrader_root(root: Path) -> Path | None:
    if root.name == "submitted":
        return root
    nested = root / "submitted"
    return nested if nested.is_dir() else None


def _nbgrader(submitted: Path, assignment: str | None) -> list[Found]:
    found = []
    for student in _visible(submitted):
        if _refused(student):
            found.append((student.name, student, "nbgrader", _refused(student)))
            continue
        if not _is_dir(student):
            continue
        folders = [p for p in _visible(student) if _is_dir(p) or _refused(p)]
        chosen = [p for p in folders if p.name == assignment] if assignment else folders
        if len(chosen) != 1:
            chosen = folders[:1] if len(folders) == 1 else chosen
        if len(chosen) == 1:
            found.append((student.name, chosen[0], "nbgrader", _refused(chosen[0])))
        else:  # no or several assignment folders: intake reports it on the student folder
            found.append((student.name, student, "nbgrader", ""))
    return found


def _is_classroom(root: Path) -> bool:
    if not root.name.endswith("-submissions"):
        return False
    repos = [p for p in _visible(root) if _is_dir(p)]
    return bool(repos) and any(_is_dir(p / "exercises") for p in repos)


def _classroom(root: Path) -> list[Found]:
    prefix = root.name[: -len("-submissions")] + "-"
    found = []
    for repo in _visible(root):
        if _is_dir(repo) or _refused(repo):
            login = (
                repo.name[len(prefix) :]
                if repo.name.startswith(prefix) and len(repo.name) > len(prefix)
                else repo.name
            )
            found.append((login, repo, "github-classroom", _refused(repo)))
    return found


def _plain(root: Path) -> tuple[list[Found], list[str]]:
    found, ignored = [], []
    for path in _visible(root):
        lower = path.name.lower()
        suffix = next((s for s in FILE_SUFFIXES if lower.endswith(s)), "")
        if _is_dir(path):
            found.append((path.name, path, "folder", ""))
        elif _refused(
            path
        ):  # a link or a FIFO named like a submission is still this student's entry
            found.append(
                (
                    path.name[: len(path.name) - len(suffix)],
                    path,
                    suffix.lstrip(".") or "other",
                    _refused(path),
                )
            )
        elif suffix:
            found.append((path.name[: -len(suffix)], path, suffix.lstrip("."), ""))
        else:
            ignored.append(safetext.name(path.name))
    return found, ignored


def _resolve_clashes(found: list[Found]) -> list[Entry]:
    by_id: dict[str, list[Found]] = defaultdict(list)
    for item in found:
        by_id[safe_id(item[0])].append(item)
    entries: list[Entry] = []
    used: set[str] = set()
    for sid, items in sorted(by_id.items()):
        if len(items) == 1:
            raw, path, layout, problem = items[0]
            entries.append(Entry(sid, safetext.name(raw), path, layout, clash=problem))
            continue
        names = ", ".join(safetext.name(p.name) for _, p, _, _ in items)
        why = (
            f"student id {sid!r} is claimed by {len(items)} entries ({names}); "
            "keep one submission per student (rename or remove the others) and rerun"
        )
        for n, (raw, path, layout, _) in enumerate(items, 1):
            key = f"{sid}@{safe_id(path.name)}"
            key = key if key not in used and key not in by_id else f"{key}-{n}"
            used.add(key)
            entries.append(Entry(key, safetext.name(raw), path, layout, clash=why))
    return entries
