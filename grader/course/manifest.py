"""The assignment manifest (``assignments.json``): typed view, loaded and schema-checked once."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from grader import schema
from grader.errors import UsageError

REPO_ROOT = Path(__file__).resolve().parents[2]
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
        raise ManifestError(
            f"no exercise {exercise_id!r} in {self.id}; known: {', '.join(self.ids())}"
        )

    def ids(self) -> list[str]:
        return [e.id for e in self.exercises]

    def by_module(self) -> dict[str, Exercise]:
        return {e.module: e for e in self.exercises}

    def bans(self) -> dict[str, tuple[str, ...]]:
        """Banned APIs keyed by module (whole exercise) and by ``module.Name`` (one function or
        class)."""
        out: dict[str, tuple[str, ...]] = {}
        for e in self.exercises:
            out[e.module] = e.banned
            out.update({f"{e.module}.{name}": names for name, names in e.banned_in.items()})
        return out

    def time_limits(self, per_test: float | None = None) -> dict[str, float]:
        """Each exercise's per-test CPU limit (``per_test`` overrides them all)."""
        return {e.id: per_test or e.time_limit_s for e in self.exercises}

    def suite_files(self, kind: str) -> list[Path]:
        """Absolute paths of the ``public`` or ``hidden`` test files, in manifest order."""
        attr = {"public": "public_tests", "hidden": "hidden_tests"}[kind]
        return [self.root / getattr(e, attr) for e in self.exercises]


def find_root(start: Path | None = None) -> Path:
    """The repository root: the nearest of ``start`` and its parents holding ``assignments.json``
    and ``exercises/`` (a student's repository, found from the current folder), else this
    checkout's."""
    if start is None:
        return REPO_ROOT
    here = start.resolve()
    for folder in (here, *here.parents):
        if (folder / "assignments.json").is_file() and (folder / "exercises").is_dir():
            return folder
    return REPO_ROOT


def load(path: Path | None = None, assignment: str | None = None) -> Assignment:
    """Load, validate and return one assignment from the manifest: ``assignment``, or by default
    :data:`DEFAULT_ASSIGNMENT` where the manifest has it, else its first (a student repository
    released for another assignment holds only that one). A caller that will use its suites checks
    them with :func:`check_paths`."""
    path = Path(path) if path else DEFAULT_MANIFEST
    document = _document(path)
    ids = [a["id"] for a in document["assignments"]]
    wanted = assignment or (DEFAULT_ASSIGNMENT if DEFAULT_ASSIGNMENT in ids else ids[0])
    for raw in document["assignments"]:
        if raw["id"] == wanted:
            return _assignment(raw, path)
    raise ManifestError(f"no assignment {wanted!r} in {path}; known: {', '.join(ids)}")


def load_all(path: Path | None = None) -> list[Assignment]:
    """Every assignment of the manifest, in its order."""
    path = Path(path) if path else DEFAULT_MANIFEST
    return [_assignment(raw, path) for raw in _document(path)["assignments"]]


def check_paths(assignment: Assignment, suites: tuple[str, ...]) -> Assignment:
    """``spec`` when every file of ``suites`` it names is a file inside its folder (and, for
    ``hidden``, each exercise's reference ``solutions/<module>.py``); else :class:`ManifestError`
    naming each, with its line in the manifest: a misspelled path is the caller's mistake, found
    before anything is graded, not a broken machine."""
    wrong = [
        f"{assignment.manifest}:{_line(assignment.manifest, field, name)}: {field} of exercise {e.id!r}: {why}"
        for e in assignment.exercises
        for field, name, why in _path_problems(assignment, e, suites)
    ]
    if wrong:
        raise ManifestError(
            f"{len(wrong)} path(s) of assignment {assignment.id!r} are wrong (fix the manifest):\n  "
            + "\n  ".join(wrong)
        )
    return assignment


def _path_problems(
    assignment: Assignment, exercise: Exercise, suites: tuple[str, ...]
) -> list[tuple[str, str, str]]:
    named = [(f"{kind}_tests", getattr(exercise, f"{kind}_tests")) for kind in suites]
    if "hidden" in suites:
        named.append(("module", exercise.module))
    root = assignment.root.resolve()
    problems = []
    for field, name in named:
        target = root / "solutions" / f"{name}.py" if field == "module" else root / name
        shown = f"solutions/{name}.py" if field == "module" else name
        if not target.resolve().is_relative_to(root):
            problems.append(
                (field, name, f"{shown!r} is outside the manifest's folder {assignment.root}")
            )
        elif not target.is_file():
            problems.append(
                (field, name, f"{shown!r} is not a file in {assignment.root}{_near(target)}")
            )
    return problems


def _near(target: Path) -> str:
    """``(did you mean test_softmax.py?)`` from the files beside a missing one."""
    import difflib

    siblings = [p.name for p in target.parent.glob("*")] if target.parent.is_dir() else []
    close = difflib.get_close_matches(target.name, siblings, n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def _line(path: Path, field: str, value: str) -> int:
    """The first line of the manifest giving ``field`` the value ``value`` (else holding the value;
    else 1)."""
    lines = path.read_text("utf-8").splitlines()
    quoted = json.dumps(value)
    for wanted in (f'"{field}"', ""):
        for number, line in enumerate(lines, 1):
            if quoted in line and wanted in line:
                return number
    return 1


def text_of(assignment: Assignment) -> str:
    """The manifest text holding ``spec`` alone (what a student repository for it ships)."""
    document = _document(assignment.manifest)
    only = [raw for raw in document["assignments"] if raw["id"] == assignment.id]
    return json.dumps({**document, "assignments": only}, indent=2) + "\n"


def _document(path: Path) -> dict[str, Any]:
    """The manifest's JSON, schema-checked; :class:`ManifestError` with a one-line reason
    otherwise."""
    try:
        text = path.read_text("utf-8")
        document = json.loads(text)
    except FileNotFoundError:
        raise ManifestError(f"manifest not found: {path}") from None
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{path}: not valid JSON ({exc})") from None
    if text not in _VALID:  # a command reads it about six times: validated once per text
        try:
            schema.validate("assignments", document)
        except (
            schema.SchemaError
        ) as exc:  # the caller's manifest: a one-line refusal, never a traceback
            raise ManifestError(f"{path}: not a valid manifest: {exc}") from None
        _VALID.add(text)
    return cast("dict[str, Any]", document)  # the schema says what it holds


# manifest texts this process found valid (the parsed copy is fresh each time)
_VALID: set[str] = set()


def _assignment(raw: dict[str, Any], path: Path) -> Assignment:
    exercises = tuple(
        Exercise(
            **{
                **e,
                "names": tuple(e["names"]),
                "banned": tuple(e["banned"]),
                "banned_in": {k: tuple(v) for k, v in e.get("banned_in", {}).items()},
            }
        )
        for e in raw["exercises"]
    )
    return Assignment(
        raw["id"], raw["title"], Limits(**raw["limits"]), exercises, path.parent, path
    )
