"""The assignment manifest (``assignments.json``): typed view, loaded and schema-checked once."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader import schema
from grader.errors import UsageError

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MANIFEST = REPO_ROOT / "assignments.json"
DEFAULT_ASSIGNMENT = "attention-basics"


class ManifestError(UsageError):
    """The manifest is missing, unreadable or inconsistent."""


@dataclass(frozen=True, slots=True)
class Exercise:
    id: str
    title: str
    module: str
    names: tuple[str, ...]
    points: float
    public_tests: str
    hidden_tests: str
    time_limit_s: float
    banned: tuple[str, ...]
    banned_in: dict[str, tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class Limits:
    submission_wall_s: float
    memory_mb: int
    processes: int
    file_size_mb: int
    output_kb: int


@dataclass(frozen=True, slots=True)
class Assignment:
    id: str
    title: str
    limits: Limits
    exercises: tuple[Exercise, ...]
    root: Path  # the folder of the manifest: solutions/, exercises/ and the suites sit beside it
    manifest: Path  # the assignments.json it was loaded from

    @property
    def max_points(self) -> float:
        return sum(e.points for e in self.exercises)

    def exercise(self, exercise_id: str) -> Exercise:
        for ex in self.exercises:
            if ex.id == exercise_id:
                return ex
        raise ManifestError(f"no exercise {exercise_id!r} in {self.id}; known: {', '.join(self.ids())}")

    def ids(self) -> list[str]:
        return [e.id for e in self.exercises]

    def by_module(self) -> dict[str, Exercise]:
        return {e.module: e for e in self.exercises}

    def bans(self) -> dict[str, tuple[str, ...]]:
        """Banned APIs keyed by module (whole exercise) and by ``module.Name`` (one function or class)."""
        out: dict[str, tuple[str, ...]] = {}
        for e in self.exercises:
            out[e.module] = e.banned
            out.update({f"{e.module}.{name}": names for name, names in e.banned_in.items()})
        return out

    def suite_files(self, kind: str) -> list[Path]:
        """Absolute paths of the ``public`` or ``hidden`` test files, in manifest order."""
        attr = {"public": "public_tests", "hidden": "hidden_tests"}[kind]
        return [self.root / getattr(e, attr) for e in self.exercises]


def find_root(start: Path | None = None) -> Path:
    """The repository root: the nearest of ``start`` and its parents holding ``assignments.json`` and
    ``exercises/`` (a student's repository, found from the current folder), else this checkout's."""
    if start is None:
        return REPO_ROOT
    here = start.resolve()
    for folder in (here, *here.parents):
        if (folder / "assignments.json").is_file() and (folder / "exercises").is_dir():
            return folder
    return REPO_ROOT


def load(path: Path | None = None, assignment: str = DEFAULT_ASSIGNMENT) -> Assignment:
    """Load, validate and return one assignment from the manifest."""
    path = Path(path) if path else DEFAULT_MANIFEST
    try:
        document = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise ManifestError(f"manifest not found: {path}") from None
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{path}: not valid JSON ({exc})") from None
    try:
        schema.validate("assignments", document)
    except schema.SchemaError as exc:  # the caller's manifest: a one-line refusal, never a traceback
        raise ManifestError(f"{path}: not a valid manifest: {exc}") from None
    for raw in document["assignments"]:
        if raw["id"] == assignment:
            return _assignment(raw, path)
    known = ", ".join(a["id"] for a in document["assignments"])
    raise ManifestError(f"no assignment {assignment!r} in {path}; known: {known}")


def _assignment(raw: dict[str, Any], path: Path) -> Assignment:
    exercises = tuple(
        Exercise(**{**e, "names": tuple(e["names"]), "banned": tuple(e["banned"]),
                    "banned_in": {k: tuple(v) for k, v in e.get("banned_in", {}).items()}})
        for e in raw["exercises"]
    )
    return Assignment(raw["id"], raw["title"], Limits(**raw["limits"]), exercises, path.parent, path)
