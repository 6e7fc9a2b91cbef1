"""Where a submission enters: a folder, a single ``.py`` or ``.ipynb``, or a ``.zip``/``.tar.gz`` of
either.

Every shape a student uploads is taken: files, a repository (modules in ``exercises/``), a folder or
a zip one level down (Gradescope unpacks a zipped folder so), an archive. Everything is copied into
a fresh staging folder holding only regular ``.py`` files, within one size budget (:class:`Box`:
what fits the sandbox's ``/box``) and caps on count. A submission is hostile input: a link, FIFO,
socket or device anywhere in it (the submission itself included) is refused, never followed or
opened (:mod:`grader.safefs`), except inside the folders a student's tools make (``.venv``,
``.git``...), which are never read; archives are unpacked with every cap checked while streaming
(:mod:`grader.intake.archive`); a notebook is never executed, and is read by a child process with
CPU and memory limits (:mod:`grader.intake.bounded`). Whatever in a submission stops it from being
read raises :class:`IntakeError` with a message for the scorecard; only a failure that does not
depend on the submission (the reader cannot start) is a :class:`~grader.errors.GraderFault`.
Names recorded in the :class:`Submission` pass through :mod:`grader.safetext`.
"""

from __future__ import annotations

import hashlib
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from grader import safetext
from grader.errors import GraderFault
from grader.intake import bounded
from grader.intake.archive import unpack
from grader.safefs import (
    MAX_FILE_BYTES,
    MAX_FILES,
    MAX_MEMBERS,
    MAX_RATIO,
    MAX_SUBMISSION_BYTES,
    MAX_TOTAL_BYTES,
    TOOL_FOLDERS,
    Box,
    IntakeError,
    check_tree,
    is_dir,
    label,
    lstat,
    open_regular,
    read_regular,
    refuse,
    regular_files,
    special,
)
from grader.sandbox import sweep

__all__ = [
    "MAX_FILES",
    "MAX_FILE_BYTES",
    "MAX_MEMBERS",
    "MAX_RATIO",
    "MAX_SUBMISSION_BYTES",
    "MAX_TOTAL_BYTES",
    "IntakeError",
    "Submission",
    "take",
]
_ARCHIVES = (".zip", ".tar.gz", ".tgz")
_MAX_DEPTH = 3  # folders and an archive opened, one inside the other, looking for the modules


@dataclass
class Submission:
    path: str
    layout: str
    box: Path
    files: list[dict[str, object]] = field(default_factory=list)
    single_module: str | None = None
    sha256: str = ""

    def cleanup(self) -> None:
        shutil.rmtree(self.box.parent, ignore_errors=True)


def take(path: Path | str, *, modules: set[str]) -> Submission:
    """Normalise ``path`` into a staging folder of module files (caller must call ``cleanup``)."""
    path = Path(path)
    staging = sweep.tempdir("submission")
    staging.chmod(
        0o711
    )  # a sandbox uid may pass through to box/ (never list it): `process` with a dropped uid
    box = staging / "box"
    box.mkdir()
    box.chmod(0o755)
    try:
        sub = _guarded(path, _Reader(staging, Box(box), modules))
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if not sub.files:
        sub.cleanup()
        raise IntakeError(
            f"{safetext.name(path, 1000)}: no Python files found "
            "(expected the exercise modules, e.g. softmax.py)"
        )
    sub.sha256 = _digest(sub.files, sub.single_module)
    return sub


@dataclass
class _Reader:
    """One submission being read: where it is staged, the exercise modules, and whether an archive
    was opened."""

    staging: Path
    box: Box
    modules: set[str]
    unpacked: bool = False  # one archive per submission: an archive inside it is never opened


def _guarded(path: Path, reader: _Reader) -> Submission:
    """:func:`_take`, with any failure to read the submission turned into an
    :class:`IntakeError`."""
    try:
        sub = _take(path, reader, 0)
        sub.files = _hashes(reader.box.path)
    except (IntakeError, GraderFault):
        raise
    except Exception as exc:  # noqa: BLE001 - a submission must never crash the grader (RecursionError, OSError...)
        raise IntakeError(
            f"{label(path)}: could not be read ({type(exc).__name__}: {safetext.name(exc, 300)}); "
            "submit plain .py files, a notebook, or a .zip/.tar.gz of them"
        ) from None
    return sub


def _take(path: Path, reader: _Reader, depth: int) -> Submission:
    mode = lstat(path).st_mode
    if special(mode):
        raise refuse(label(path), special(mode))
    shown, box = safetext.name(path, 1000), reader.box
    if stat.S_ISDIR(mode):
        check_tree(path)
        inner = _inner(path, reader) if depth < _MAX_DEPTH else None
        if inner is None:
            return Submission(shown, _copy_modules(_module_folder(path), box), box.path)
        sub = _take(
            inner, reader, depth + 1
        )  # a folder one level down, a zip, one file of every exercise
        return Submission(
            shown,
            sub.layout if depth else f"in-folder:{sub.layout}",
            box.path,
            single_module=sub.single_module,
        )
    name = path.name.lower()
    if name.endswith((".py", ".ipynb")):
        notebook = name.endswith(".ipynb")
        stem = path.stem
        if notebook:
            _write_notebook(path, box, f"{stem}.py")
        else:
            box.write(f"{stem}.py", read_regular(path, MAX_FILE_BYTES))
        single = None if stem in reader.modules else stem
        return Submission(
            shown, "notebook" if notebook else "single-file", box.path, single_module=single
        )
    if name.endswith(_ARCHIVES) and not reader.unpacked:
        unpacked = reader.staging / "unpacked"
        unpacked.mkdir()
        reader.unpacked = True
        kind = "zip" if name.endswith(".zip") else "tar.gz"
        unpack(path, unpacked, kind)
        sub = _take(unpacked, reader, depth + 1)
        return Submission(shown, f"{kind}:{sub.layout}", box.path, single_module=sub.single_module)
    raise IntakeError(
        f"{label(path)}: unsupported submission type "
        "(give a folder, a .py, a .ipynb, a .zip or a .tar.gz)"
    )


def _module_folder(folder: Path) -> Path:
    """The student's repo keeps modules in ``exercises/``; otherwise they sit at the top."""
    nested = folder / "exercises"
    if is_dir(nested) and (regular_files(nested, ".py") or regular_files(nested, ".ipynb")):
        return nested
    return folder


def _inner(folder: Path, reader: _Reader) -> Path | None:
    """What a folder stands for when it holds one thing besides tools' folders and dot-files, and no
    ``exercises/``: a folder (Gradescope unpacks a zipped folder one level down), an archive (not
    inside another), or a file of every exercise (a module's own file is a folder of modules)."""
    if _module_folder(folder) != folder:
        return None
    entries = [
        p for p in folder.iterdir() if p.name not in TOOL_FOLDERS and not p.name.startswith(".")
    ]
    if len(entries) != 1:
        return None
    only, name = entries[0], entries[0].name.lower()
    if is_dir(only) or (name.endswith(_ARCHIVES) and not reader.unpacked):
        return only
    return only if name.endswith((".py", ".ipynb")) and only.stem not in reader.modules else None


def _copy_modules(src: Path, box: Box) -> str:
    files = regular_files(src, ".py")
    if len(files) > MAX_FILES:
        raise IntakeError(
            f"{label(src)}: {len(files)} Python files, more than the {MAX_FILES} allowed"
        )
    for f in files:
        box.write(f.name, read_regular(f, MAX_FILE_BYTES))
    taken = {
        f.stem for f in files
    }  # a notebook per exercise, unless a .py of that name is there too
    for nb in (p for p in regular_files(src, ".ipynb") if p.stem not in taken):
        _write_notebook(nb, box, f"{nb.stem}.py")
    return "exercises-folder" if src.name == "exercises" else "directory"


def _write_notebook(src: Path, box: Box, name: str) -> None:
    """Write the definitions of notebook ``src`` as module ``name``, without running any cell (read
    in a bounded child process: :mod:`grader.intake.bounded`)."""
    with open_regular(src) as fh:
        box.write(name, bounded.notebook_module(label(src), fh).encode("utf-8"))


def _digest(files: list[dict[str, object]], single_module: str | None) -> str:
    """The submission's hash: each module's name and content; a file of every exercise is its
    content only (its name is whatever the student called it: two students sending the same file
    hash the same)."""
    return hashlib.sha256(
        "".join(f"{'' if single_module else f['name']}:{f['sha256']};" for f in files).encode()
    ).hexdigest()


def _hashes(box: Path) -> list[dict[str, object]]:
    """What the scorecard records of each module: its name (sanitised), size and hash."""
    out = []
    for f in sorted(box.iterdir()):
        data = f.read_bytes()
        out.append(
            {
                "name": safetext.name(f.name),
                "bytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
        )
    return out
