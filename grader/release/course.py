"""The course checkout a delivery carries, file by file: what goes in, and a zip writer that keeps
modes.

A Gradescope zip carries the whole course (manifest, solutions, stubs, both suites, the grader's
source): it is unpacked on a machine only the instructor and Gradescope control. A Classroom 50
bundle carries none of the hidden half (see :mod:`grader.release.classroom50`).
"""

from __future__ import annotations

import stat
import zipfile
from pathlib import Path

from grader.course import manifest

TOP_FILES = (
    "assignments.json",
    "pyproject.toml",
    "README.md",
)  # pyproject names README.md: pip needs both
SKIP_PARTS = {"__pycache__", ".pytest_cache"}


def course_files(root: Path, assignment: manifest.Assignment) -> list[tuple[Path, str]]:
    """(source file, path inside the delivery) for the whole course checkout under ``root``."""
    files = [(root / name, name) for name in TOP_FILES]
    files += _tree(root / "grader", "grader")
    for folder in ("exercises", "solutions"):
        files += [(p, f"{folder}/{p.name}") for p in sorted((root / folder).glob("*.py"))]
    for kind in ("public", "hidden"):
        files += [(p, p.relative_to(root).as_posix()) for p in assignment.suite_files(kind)]
    return files


def _tree(folder: Path, prefix: str) -> list[tuple[Path, str]]:
    found = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if path.is_file() and not SKIP_PARTS.intersection(rel.parts) and path.suffix != ".pyc":
            found.append((path, f"{prefix}/{rel.as_posix()}"))
    return found


def write_zip(out: Path, files: list[tuple[Path, str]], texts: dict[str, tuple[str, int]]) -> Path:
    """A zip of ``files`` (mode 0644) and generated ``texts`` ({name: (text, mode)}), written
    atomically."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.partial")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, (text, mode) in sorted(texts.items()):
            zf.writestr(_info(name, mode), text)
        for src, name in files:
            zf.writestr(_info(name, 0o644), src.read_bytes())
    tmp.replace(out)
    return out


def _info(name: str, mode: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(
        name, date_time=(2026, 1, 1, 0, 0, 0)
    )  # reproducible: same course, same bytes
    info.external_attr = (stat.S_IFREG | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    return info


def extract(zip_path: Path, dest: Path) -> None:
    """Unpack keeping the executable bits (what Gradescope's image build does with
    run_autograder)."""
    with zipfile.ZipFile(zip_path) as zf:
        for info in zf.infolist():
            target = dest / info.filename
            if info.filename.startswith("/") or ".." in Path(info.filename).parts:
                raise ValueError(f"{zip_path}: unsafe member name {info.filename!r}")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(info))
            target.chmod((info.external_attr >> 16) & 0o777 or 0o644)
