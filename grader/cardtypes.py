"""The scorecard's shape as types: :class:`Scorecard` and its parts, checked against the scorecard
schema's required and optional keys (tests/project/scoring/test_cardtypes.py), so the code and the
schema cannot drift.

No ``from __future__ import annotations`` here: TypedDict reads ``NotRequired`` from evaluated
annotations. ``timings`` is filled in as a grade goes (``started`` first, ``finished`` and
``total_s`` at the end), so its type has every key optional; the schema requires the three on a
written card.
"""

from typing import Any, Literal, NotRequired, TypedDict, TypeGuard, get_args

Outcome = Literal["passed", "failed", "error", "skipped", "timeout"]


def is_outcome(name: object) -> TypeGuard[Outcome]:
    return name in get_args(Outcome)


class TestEntry(TypedDict):
    id: str
    name: str
    outcome: Outcome
    points: float
    max_points: float
    message: str
    duration: float
    cuda: bool
    counted: bool
    cpu_s: NotRequired[float]
    wrong_answer: NotRequired[str]


class ExerciseEntry(TypedDict):
    id: str
    title: str
    score: float
    max_score: float
    tests: list[TestEntry]
    withheld: NotRequired[str]
    capped: NotRequired[str]


class Submission(TypedDict):
    path: str
    sha256: str
    layout: str
    files: list[Any]
    student: NotRequired[str]


ErrorKind = Literal["intake", "isolation", "grader", "interrupted"]


def is_error_kind(name: object) -> TypeGuard[ErrorKind]:
    return name in get_args(ErrorKind)


class ErrorInfo(TypedDict):
    kind: ErrorKind
    message: str


class Timings(TypedDict, total=False):
    started: str
    finished: str
    total_s: float
    intake_s: float
    tests_s: float
    integrity_s: float


class StudentOutput(TypedDict):
    stdout_bytes: int
    stderr_bytes: int


class GraderInfo(TypedDict):
    version: str
    fingerprint: NotRequired[dict[str, str]]  # grader.fingerprint.record: what decided the grade


class Scorecard(TypedDict):
    schema_version: int
    assignment: str
    submission: Submission
    status: Literal["graded", "error"]
    error: ErrorInfo | None
    score: float
    max_score: float
    exercises: list[ExerciseEntry]
    isolation: dict[
        str, Any
    ]  # the attested record: grader.sandbox.record builds it, the schema checks it
    seed: int
    grader: GraderInfo
    environment: dict[str, Any]
    timings: Timings
    incidents: list[Any]
    student_output: StudentOutput
    integrity: NotRequired[list[dict[str, Any]]]
    canary: NotRequired[dict[str, Any]]


# A scorecard made in this process (typed), or one read back as JSON from a pipe or a file (checked
# by the schema where it was written), or its slim form (grader.scoring.scorecard.slim): what the
# batch and the exports hold.
AnyCard = Scorecard | dict[str, Any]


def error_of(card: AnyCard) -> ErrorInfo:
    """The ``error`` of a card with ``status: error``: every card we write has one there
    (:func:`grader.scoring.scorecard.with_error`) and scorecard schema v3 requires it (v2 cards are
    read under that rule: :data:`grader.schema.OLDER`), so a validated card always has one; a card
    never validated (one built in a test) that lacks it raises ``TypeError``, as indexing ``None``
    did."""
    error: ErrorInfo | None = card["error"]
    if error is None:
        raise TypeError("a scorecard with status error names no error")
    return error
