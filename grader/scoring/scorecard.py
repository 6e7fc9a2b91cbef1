"""Where the scorecard is built and written: validated against its schema, written atomically.

The one place a scorecard is made: :func:`new` (nothing scored yet), then :func:`scored`,
:func:`with_error` and :func:`finished`; every path (a grade, a local check, CI, a batch's own error
cards) goes through them. An invalid scorecard is a grader bug: :func:`write` refuses to write one.
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from grader import __version__, safetext, schema
from grader.cardtypes import (
    AnyCard,
    ErrorKind,
    ExerciseEntry,
    GraderInfo,
    Outcome,
    Scorecard,
    Submission,
    TestEntry,
    is_outcome,
)
from grader.scoring.collect import TestResult
from grader.scoring.points import ExerciseScore, counts_toward_max


def clean(text: str, limit: int = 4000) -> str:
    """Student-influenced text made safe to show (see :mod:`grader.safetext`), length capped."""
    return safetext.text(text, limit)


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def environment() -> dict[str, Any]:
    import torch

    cuda = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {
        "python": platform.python_version(),
        "torch": str(torch.__version__),
        "cuda": cuda,
        "platform": platform.platform(terse=True),
    }


# 2: the attested isolation record, integrity severity; 3: error tied to status (grader.schema)
SCHEMA_VERSION = 3


def new(
    *,
    assignment: str,
    max_score: float,
    path: object,
    isolation: dict[str, Any],
    seed: int,
    student: str | None = None,
    layout: str = "unknown",
    started: str | None = None,
) -> Scorecard:
    """A fresh ``status: graded`` scorecard with nothing scored yet (student strings sanitised
    here)."""
    sub: Submission = {
        "path": safetext.name(path, 1000),
        "sha256": "",
        "layout": layout,
        "files": [],
    }
    if student:
        sub["student"] = safetext.name(student)
    return {
        "schema_version": SCHEMA_VERSION,
        "assignment": assignment,
        "submission": sub,
        "status": "graded",
        "error": None,
        "score": 0,
        "max_score": max_score,
        "exercises": [],
        "isolation": isolation,
        "seed": seed,
        "grader": version(),
        "environment": environment(),
        "timings": {"started": started or now()},
        "incidents": [],
        "student_output": {"stdout_bytes": 0, "stderr_bytes": 0},
    }


def inprocess_isolation(
    *, uid: int | None = None, threads: int = 1, limits: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The isolation record of a run with no sandbox at all (a student's local check, the project's
    tests)."""
    return {
        "backend": "inprocess",
        "uid": os.getuid() if uid is None and hasattr(os, "getuid") else uid or 0,
        "limits": limits or {},
        "cgroup": "none",
        "seccomp": False,
        "threads": threads,
        "file_view": "inprocess",
        "attested": False,
    }


def scored(card: Scorecard, scores: list[ExerciseScore], *, require_cuda: bool) -> Scorecard:
    """Fill in the exercises and the totals from the scored results."""
    card["exercises"] = exercise_entries(scores, require_cuda=require_cuda)
    card["score"] = round(sum(s.score for s in scores), 6)
    card["max_score"] = round(sum(s.max_score for s in scores), 6)
    return card


def with_error(card: Scorecard, kind: ErrorKind, message: str) -> Scorecard:
    """``status: error`` of ``kind`` (grader, intake, isolation, ...): no points, the message
    sanitised."""
    card["status"], card["error"] = "error", {"kind": kind, "message": clean(message)}
    card["score"] = 0
    return card


def finished(card: Scorecard, *, seconds: float) -> Scorecard:
    timings = card["timings"]
    timings["finished"], timings["total_s"] = now(), round(max(seconds, 0.0), 4)
    return card


def test_entry(result: TestResult, *, require_cuda: bool) -> TestEntry:
    entry: TestEntry = {
        "id": result.id,
        "name": result.name,
        "outcome": outcome(result.outcome),
        "points": result.points,
        "max_points": result.max_points,
        "message": clean(result.message),
        "duration": round(result.duration, 4),
        "cuda": result.cuda,
        "counted": counts_toward_max(result, require_cuda=require_cuda),
    }
    if result.wrong_answer and result.outcome == "failed":
        entry["wrong_answer"] = result.wrong_answer
    return entry


def outcome(name: str) -> Outcome:
    """A test's outcome as the scorecard names it (collect makes only these; anything else is an
    error)."""
    return name if is_outcome(name) else "error"


def exercise_entries(scores: list[ExerciseScore], *, require_cuda: bool) -> list[ExerciseEntry]:
    return [exercise_entry(s, require_cuda=require_cuda) for s in scores]


def exercise_entry(score: ExerciseScore, *, require_cuda: bool) -> ExerciseEntry:
    entry: ExerciseEntry = {
        "id": score.id,
        "title": score.title,
        "score": score.score,
        "max_score": score.max_score,
        "tests": _capped([test_entry(t, require_cuda=require_cuda) for t in score.tests], score),
    }
    if score.capped:
        entry["capped"] = clean(score.capped)
    return entry


def _capped(tests: list[TestEntry], score: ExerciseScore) -> list[TestEntry]:
    """A capped exercise's passed tests keep their share of the capped score, so that the tests'
    points still add up to the exercise's (GitHub Classroom and Gradescope sum them)."""
    earned = sum(t["points"] for t in tests if t["counted"])
    if score.capped and earned > 0:
        for test in tests:
            test["points"] = round(test["points"] * score.score / earned, 6)
    return tests


def write(card: AnyCard, out: Path) -> None:
    """Validate, then write atomically (temp file in the same folder + ``os.replace``)."""
    schema.validate("scorecard", card, writing=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(card, fh, indent=2)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def slim(card: AnyCard) -> dict[str, Any]:
    """``card`` without its tests and the student's output: what a list of the whole class keeps of
    each submission (scores, status, error, incidents, integrity, isolation) while the whole card
    stays on disk. A whole card is about 160 KB of Python objects; 1,000 of them held to the end of
    a batch were 160 MB."""
    kept = {k: v for k, v in card.items() if k not in ("exercises", "student_output")}
    kept["exercises"] = [{k: v for k, v in ex.items() if k != "tests"} for ex in card["exercises"]]
    return kept


def dumps(card: AnyCard) -> str:
    schema.validate("scorecard", card, writing=True)
    return json.dumps(card, indent=2)


def version() -> GraderInfo:
    return {"version": __version__}
