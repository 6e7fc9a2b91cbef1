"""What decides a grade, fingerprinted: the one place that says which inputs a scorecard depends on.

A scorecard records :func:`record` (``grader.fingerprint``): one digest per part that can change a
grade (the grader's source, the assignment's manifest entry, its hidden suites, the reference
solutions, torch, Python, the isolation level and the grading options) and ``key``, a digest of them
all. ``grader batch`` keeps a scorecard only while its record equals the one this run would write
(:func:`changed` names what differs, and :data:`REASONS` says it in words), so an instructor who
fixes a hidden test, a point value or a reference and reruns gets new grades and is told how many
and why. The canary's cache key (:mod:`grader.canary`) and the agreement of shards and Dask workers
(:func:`inputs_digest`) are made from the same file lists.

Files are named by their path relative to the grader package or the manifest's folder, so the record
is the same wherever a checkout lives (on every machine of a cluster). Reading torch's version costs
no import.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import platform
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

from grader import __version__, safefs
from grader.course import manifest
from grader.sandbox.levels import BackendName

PARTS = ("grader", "manifest", "suites", "references", "torch", "python", "isolation", "options")
REASONS = {
    "grader": "the grader's source changed",
    "manifest": "the assignment's manifest entry changed (points, limits, bans)",
    "suites": "the hidden suites changed",
    "references": "the reference solutions changed",
    "torch": "torch changed",
    "python": "Python changed",
    "isolation": "the isolation level changed",
    "options": "the grading options changed (--require-cuda, time limits)",
    "missing": "graded before scorecards recorded what decides a grade (grader 0.1.0)",
}
PACKAGE = Path(__file__).resolve().parent


def files(assignment: manifest.Assignment) -> dict[str, list[Path]]:
    """The files behind each part of the record, and ``stubs`` (``exercises/``: only the canary
    grades them)."""
    root = assignment.root
    return {
        "grader": _package_files(),
        "suites": _sorted({root / e.hidden_tests for e in assignment.exercises}),
        "references": _sorted((root / "solutions").glob("*.py")),
        "stubs": _sorted((root / "exercises").glob("*.py")),
    }


def _package_files() -> list[Path]:
    """The grader's ``*.py`` and ``*.json`` at any depth, sorted, as ``PACKAGE.rglob`` lists them
    (entries of any kind, folders behind symbolic links not entered): one ``os.walk``, where two
    ``rglob`` passes cost 3 ms, and a grade lists them up to ten times (the canary's key, the
    scorecard's record), a batch slot for every submission. The paths are made again only when the
    walk finds other names (making its 214 ``Path`` objects was most of the time left)."""
    found = []
    for folder, dirs, names in os.walk(PACKAGE):
        found += [os.path.join(folder, n) for n in (*dirs, *names) if n.endswith((".py", ".json"))]
    global _listed
    walked = (str(PACKAGE), tuple(found))
    if _listed is None or _listed.names != walked:
        _listed = _Listing(walked, tuple(_sorted(map(Path, found))))
    return list(_listed.paths)


class _Listing(NamedTuple):
    """The last walk: the names it found (with the package's folder) and their sorted paths."""

    names: tuple[str, tuple[str, ...]]
    paths: tuple[Path, ...]


_listed: _Listing | None = None


def _sorted(paths: Iterable[Path]) -> list[Path]:
    """In ``Path``'s own order (by parts), compared as tuples: ``Path.__lt__`` is a Python call per
    comparison, most of the time of listing the grader's 214 files."""
    return sorted(paths, key=lambda path: path.parts)


def record(
    assignment: manifest.Assignment,
    *,
    backend: BackendName,
    require_cuda: bool = False,
    per_test_time_limit: float | None = None,
) -> dict[str, str]:
    """The scorecard's ``grader.fingerprint``: each part's digest (or its plain value) and ``key``
    over all."""
    found = files(assignment)
    parts = {
        "grader": _digest(found["grader"], assignment),
        "manifest": _sha(manifest.text_of(assignment).encode()),
        "suites": _digest(found["suites"], assignment),
        "references": _digest(found["references"], assignment),
        "torch": torch_version(),
        "python": ".".join(platform.python_version_tuple()[:2]),
        "isolation": backend,
        "options": json.dumps({"require_cuda": require_cuda, "time_limit": per_test_time_limit}),
    }
    return {"key": _sha(json.dumps(parts, sort_keys=True).encode()), **parts}


def changed(old: dict[str, Any] | None, new: dict[str, str]) -> list[str]:
    """The parts of ``new`` that ``old`` (a scorecard's record, None when it has none) does not
    match, in :data:`PARTS` order; ``["missing"]`` when there is no record; [] when the scorecard is
    current."""
    if not isinstance(old, dict):
        return ["missing"]
    if old.get("key") == new["key"]:
        return []
    return [part for part in PARTS if old.get(part) != new[part]] or ["grader"]


def inputs_digest(assignment: manifest.Assignment) -> str:
    """The machine-independent files a grade and the canary's proof depend on (grader, manifest,
    suites, references, stubs), by relative name: equal on every host with the same checkout
    (shards, Dask workers)."""
    digest = hashlib.sha256(f"{__version__}\0{assignment.id}\0".encode())
    for part, paths in files(assignment).items():
        digest.update(f"{part}\0{_digest(paths, assignment)}\0".encode())
    digest.update(_sha(manifest.text_of(assignment).encode()).encode())
    return digest.hexdigest()


@functools.cache
def torch_version() -> str:
    """torch's installed version (``2.13.0+cpu``), from its metadata: no import (about a second)."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return "none"


def _digest(paths: list[Path], assignment: manifest.Assignment) -> str:
    """sha256 over the files' relative names and contents; reused while no file's signature
    changed (a slot process records it for every submission it grades: 35 ms of hashing each time, 1
    ms of ``stat``)."""
    stats = [found for found in map(safefs.signature, paths) if found is not None]
    signature = (str(assignment.root), tuple(stats))
    if signature not in _DIGESTS:
        digest = hashlib.sha256()
        for name, *_ in stats:
            digest.update(
                _name(Path(name), assignment).encode() + b"\0" + Path(name).read_bytes() + b"\0"
            )
        _DIGESTS[signature] = digest.hexdigest()
    return _DIGESTS[signature]


_DIGESTS: dict[tuple[str, tuple[safefs.Signature, ...]], str] = {}


def _name(path: Path, assignment: manifest.Assignment) -> str:
    """``path`` relative to the grader package or the manifest's folder: the same on every
    machine."""
    resolved = _real(path)
    for base, label in ((PACKAGE, "grader"), (assignment.root.resolve(), "assignment")):
        if resolved.is_relative_to(base):
            return f"{label}/{resolved.relative_to(base).as_posix()}"
    return path.name


def _real(path: Path) -> Path:
    """``path.resolve()``; a grader file as listed (no link, no ``..``) is its own: the walk that
    found it entered no linked folder, below a resolved ``PACKAGE`` (resolving all 214 cost 20 ms a
    process)."""
    if path.is_relative_to(PACKAGE) and ".." not in path.parts and not path.is_symlink():
        return path
    return path.resolve()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
