"""Find the submissions in a class folder and the student id of each, from the layout.

Layouts (checked in this order):

- nbgrader: ``submitted/<student>/<assignment>/`` (the folder given is ``submitted`` or its parent);
- GitHub Classroom clone: ``<assignment>-submissions/<login>/`` holding each student's repo with
  ``exercises/`` (a ``<assignment>-`` prefix on the repo folder is dropped from the login);
- a plain class folder: per-student folders, ``.zip``/``.tar.gz``/``.tgz`` archives, single
  ``alice.py`` files (and ``.ipynb`` notebooks, which intake decides about).

Ids are made safe as file names. Two entries claiming one id are a *clash*: each clashing entry is
kept, under a distinct key, with ``clash`` set, so the engine gives it an error scorecard.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".zip")
FILE_SUFFIXES = (*ARCHIVE_SUFFIXES, ".py", ".ipynb")
_UNSAFE = re.compile(r"[^A-Za-z0-9._@+-]")


class DiscoveryError(ValueError):
    """The submissions folder cannot be read as a class (message says what to give instead)."""


@dataclass(frozen=True)
class Entry:
    """One submission to grade: ``key`` names its scorecard file, ``student`` is the id shown."""

    key: str
    student: str
    path: Path
    layout: str
    clash: str = ""  # why this entry cannot be graded under its id (empty when fine)


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
        raise DiscoveryError(f"{root}: not a folder (give the folder that holds the class's submissions)")
    nb = _nbgrader_root(root)
    if nb is not None:
        found, ignored, layout = _nbgrader(nb, assignment), [], "nbgrader"
    elif _is_classroom(root):
        found, ignored, layout = _classroom(root), [], "github-classroom"
    else:
        found, ignored = _plain(root)
        layout = "folder"
    return Discovery(_resolve_clashes(found), layout, ignored)


def _visible(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if not p.name.startswith((".", "__MACOSX", "__pycache__")))


def _nbgrader_root(root: Path) -> Path | None:
    if root.name == "submitted":
        return root
    nested = root / "submitted"
    return nested if nested.is_dir() else None


def _nbgrader(submitted: Path, assignment: str | None) -> list[tuple[str, Path, str]]:
    found = []
    for student in _visible(submitted):
        if not student.is_dir():
            continue
        folders = [p for p in _visible(student) if p.is_dir()]
        chosen = [p for p in folders if p.name == assignment] if assignment else folders
        if len(chosen) != 1:
            chosen = folders[:1] if len(folders) == 1 else chosen
        if len(chosen) == 1:
            found.append((student.name, chosen[0], "nbgrader"))
        else:  # no or several assignment folders: intake reports it on the student folder
            found.append((student.name, student, "nbgrader"))
    return found


def _is_classroom(root: Path) -> bool:
    if not root.name.endswith("-submissions"):
        return False
    repos = [p for p in _visible(root) if p.is_dir()]
    return bool(repos) and any((p / "exercises").is_dir() for p in repos)


def _classroom(root: Path) -> list[tuple[str, Path, str]]:
    prefix = root.name[: -len("-submissions")] + "-"
    found = []
    for repo in _visible(root):
        if repo.is_dir():
            login = repo.name[len(prefix):] if repo.name.startswith(prefix) and len(repo.name) > len(prefix) else repo.name
            found.append((login, repo, "github-classroom"))
    return found


def _plain(root: Path) -> tuple[list[tuple[str, Path, str]], list[str]]:
    found, ignored = [], []
    for path in _visible(root):
        lower = path.name.lower()
        if path.is_dir():
            found.append((path.name, path, "folder"))
        elif lower.endswith(FILE_SUFFIXES):
            suffix = next(s for s in FILE_SUFFIXES if lower.endswith(s))
            found.append((path.name[: -len(suffix)], path, suffix.lstrip(".")))
        else:
            ignored.append(path.name)
    return found, ignored


def _resolve_clashes(found: list[tuple[str, Path, str]]) -> list[Entry]:
    by_id: dict[str, list[tuple[str, Path, str]]] = defaultdict(list)
    for raw, path, layout in found:
        by_id[safe_id(raw)].append((raw, path, layout))
    entries: list[Entry] = []
    used: set[str] = set()
    for sid, items in sorted(by_id.items()):
        if len(items) == 1:
            raw, path, layout = items[0]
            entries.append(Entry(sid, raw, path, layout))
            continue
        names = ", ".join(p.name for _, p, _ in items)
        why = (f"student id {sid!r} is claimed by {len(items)} entries ({names}); "
               "keep one submission per student (rename or remove the others) and rerun")
        for n, (raw, path, layout) in enumerate(items, 1):
            key = f"{sid}@{safe_id(path.name)}"
            key = key if key not in used and key not in by_id else f"{key}-{n}"
            used.add(key)
            entries.append(Entry(key, raw, path, layout, clash=why))
    return entries
