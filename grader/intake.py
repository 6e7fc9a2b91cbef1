"""Where a submission enters: a folder, a single ``.py`` or ``.ipynb``, or a ``.zip``/``.tar.gz`` of either.

Everything is copied into a fresh staging folder holding only regular ``.py`` files, with caps on
count and size. A submission is hostile input: a link, FIFO, socket or device anywhere in it (the
submission itself included) is refused, never followed or opened (:mod:`grader.intake_fs`);
archives are unpacked with every cap checked while streaming (:mod:`grader.intake_archive`); a
notebook is never executed (:mod:`grader.intake_notebook`). Whatever goes wrong while reading a
submission raises :class:`IntakeError` with a message for the scorecard, never another exception.
Names recorded in the :class:`Submission` pass through :mod:`grader.safetext`.
"""

from __future__ import annotations

import hashlib
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from grader import safetext
from grader.intake_archive import unpack
from grader.intake_fs import (
    MAX_FILE_BYTES,
    MAX_FILES,
    MAX_MEMBERS,
    MAX_RATIO,
    MAX_TOTAL_BYTES,
    IntakeError,
    check_tree,
    is_dir,
    label,
    lstat,
    read_regular,
    refuse,
    regular_files,
    special,
    write_module,
)
from grader.intake_notebook import notebook_module
from grader.sandbox import sweep

__all__ = ["MAX_FILES", "MAX_FILE_BYTES", "MAX_MEMBERS", "MAX_RATIO", "MAX_TOTAL_BYTES", "IntakeError",
           "Submission", "take"]


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
    staging.chmod(0o711)  # a sandbox uid may pass through to box/ (never list it): `process` with a dropped uid
    box = staging / "box"
    box.mkdir()
    box.chmod(0o755)
    try:
        sub = _guarded(path, box, staging, modules)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if not sub.files:
        sub.cleanup()
        raise IntakeError(f"{safetext.name(path, 1000)}: no Python files found "
                          "(expected the exercise modules, e.g. softmax.py)")
    sub.sha256 = hashlib.sha256("".join(f"{f['name']}:{f['sha256']};" for f in sub.files).encode()).hexdigest()
    return sub


def _guarded(path: Path, box: Path, staging: Path, modules: set[str]) -> Submission:
    """:func:`_take`, with any failure to read the submission turned into an :class:`IntakeError`."""
    try:
        sub = _take(path, box, staging, modules)
        sub.files = _hashes(box)
    except IntakeError:
        raise
    except Exception as exc:  # noqa: BLE001 - a submission must never crash the grader (RecursionError, OSError...)
        raise IntakeError(f"{label(path)}: could not be read ({type(exc).__name__}: {safetext.name(exc, 300)}); "
                          "submit plain .py files, a notebook, or a .zip/.tar.gz of them") from None
    return sub


def _take(path: Path, box: Path, staging: Path, modules: set[str]) -> Submission:
    mode = lstat(path).st_mode
    if special(mode):
        raise refuse(label(path), special(mode))
    shown = safetext.name(path, 1000)
    if stat.S_ISDIR(mode):
        check_tree(path)
        return Submission(shown, _copy_modules(_module_folder(path), box), box)
    name = path.name.lower()
    if name.endswith((".py", ".ipynb")):
        notebook = name.endswith(".ipynb")
        dst = box / f"{path.stem}.py"
        if notebook:
            _write_notebook(path, dst)
        else:
            write_module(dst, read_regular(path, MAX_FILE_BYTES))
        single = None if path.stem in modules else path.stem
        return Submission(shown, "notebook" if notebook else "single-file", box, single_module=single)
    if name.endswith((".zip", ".tar.gz", ".tgz")):
        unpacked = staging / "unpacked"
        unpacked.mkdir()
        kind = "zip" if name.endswith(".zip") else "tar.gz"
        unpack(path, unpacked, kind)
        inner = _take(_single_child(unpacked), box, staging, modules)
        return Submission(shown, f"{kind}:{inner.layout}", box, single_module=inner.single_module)
    raise IntakeError(f"{label(path)}: unsupported submission type "
                      "(give a folder, a .py, a .ipynb, a .zip or a .tar.gz)")


def _module_folder(folder: Path) -> Path:
    """The student's repo keeps modules in ``exercises/``; otherwise they sit at the top."""
    nested = folder / "exercises"
    if is_dir(nested) and (regular_files(nested, ".py") or regular_files(nested, ".ipynb")):
        return nested
    return folder


def _single_child(folder: Path) -> Path:
    entries = [p for p in folder.iterdir() if not p.name.startswith((".", "__MACOSX"))]
    if len(entries) == 1 and (is_dir(entries[0]) or entries[0].suffix in (".py", ".ipynb")):
        return entries[0]
    return folder


def _copy_modules(src: Path, box: Path) -> str:
    files = regular_files(src, ".py")
    if len(files) > MAX_FILES:
        raise IntakeError(f"{label(src)}: {len(files)} Python files, more than the {MAX_FILES} allowed")
    for f in files:
        write_module(box / f.name, read_regular(f, MAX_FILE_BYTES))
    taken = {f.stem for f in files}  # a notebook per exercise, unless a .py of that name is there too
    for nb in (p for p in regular_files(src, ".ipynb") if p.stem not in taken):
        _write_notebook(nb, box / f"{nb.stem}.py")
    return "exercises-folder" if src.name == "exercises" else "directory"


def _write_notebook(src: Path, dst: Path) -> None:
    """Write the definitions of notebook ``src`` as module ``dst``, without running any cell."""
    write_module(dst, notebook_module(label(src), read_regular(src, MAX_TOTAL_BYTES)).encode("utf-8"))


def _hashes(box: Path) -> list[dict[str, object]]:
    """What the scorecard records of each module: its name (sanitised), size and hash."""
    out = []
    for f in sorted(box.iterdir()):
        data = f.read_bytes()
        out.append({"name": safetext.name(f.name), "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    return out
