"""Scorecards the batch engine makes itself (clash, dead slot, watchdog) and the resume check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grader import fingerprint
from grader.course import manifest
from grader.sandbox import isolation as iso
from grader.scoring import scorecard

RETRY_KINDS = ("grader", "interrupted", "isolation")  # errors a rerun tries again


def error_card(
    *,
    assignment: manifest.Assignment,
    launch: iso.LaunchSpec,
    path: Path,
    student: str,
    kind: str,
    message: str,
    sha256: str = "",
    seconds: float = 0.0,
    exercises: list[str] | None = None,
) -> dict[str, Any]:
    """A schema-valid ``status: error`` scorecard for a submission the engine could not grade."""
    chosen = set(exercises or assignment.ids())
    card = scorecard.new(
        assignment=assignment.id,
        path=path,
        student=student,
        isolation=launch.describe(),
        seed=0,
        max_score=sum(e.points for e in assignment.exercises if e.id in chosen),
    )
    card["submission"]["sha256"] = sha256
    return scorecard.finished(scorecard.with_error(card, kind, message), seconds=seconds)


def load(path: Path) -> dict[str, Any] | None:
    """The scorecard at ``path`` when it exists and is valid, else ``None``."""
    from grader import schema

    try:
        card: dict[str, Any] = json.loads(path.read_text("utf-8"))
        schema.validate("scorecard", card)
    except (OSError, ValueError):
        return None
    return card


def stale(
    card: dict[str, Any] | None,
    *,
    sha256: str,
    assignment: str,
    exercise_ids: list[str],
    grading: dict[str, str],
) -> list[str]:
    """Why ``card`` does not already grade this content, assignment and exercise set with what decides a grade
    now (``grading``: :func:`grader.fingerprint.record`); [] when it does. The reasons are keys of
    :data:`REASONS` (``grader.fingerprint.REASONS`` names the parts)."""
    if card is None or not sha256:
        return ["new"]
    if card["status"] == "error" and (card["error"] or {}).get("kind") in RETRY_KINDS:
        return ["error"]
    if card["submission"]["sha256"] != sha256 or card["assignment"] != assignment:
        return ["submission"]
    if card["status"] != "error" and sorted(e["id"] for e in card["exercises"]) != sorted(
        exercise_ids
    ):
        return ["exercises"]
    return fingerprint.changed(card["grader"].get("fingerprint"), grading)


REASONS = {
    **fingerprint.REASONS,
    "new": "not graded before",
    "error": "its last grading ended in an error to retry",
    "submission": "the submission changed",
    "exercises": "another set of exercises is graded",
    "force": "--force was given",
}
