"""Scorecards the batch engine makes itself (clash, dead slot, watchdog), the resume check, and the
class's scorecards read back from disk one at a time (:class:`Shelf`)."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator
from pathlib import Path

from grader import fingerprint
from grader.cardtypes import AnyCard, ErrorKind, Scorecard
from grader.course import manifest
from grader.errors import GraderFault
from grader.sandbox import isolation as iso
from grader.scoring import scorecard

RETRY_KINDS = ("grader", "interrupted", "isolation")  # errors a rerun tries again


def error_card(
    *,
    assignment: manifest.Assignment,
    launch: iso.LaunchSpec,
    path: Path,
    student: str,
    kind: ErrorKind,
    message: str,
    sha256: str = "",
    seconds: float = 0.0,
    exercises: list[str] | None = None,
) -> Scorecard:
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


def card_path(out: Path, key: str) -> Path:
    """Where a batch writes the scorecard of ``key``: the one place the name is decided."""
    return out / "scorecards" / f"{key}.json"


def load(path: Path) -> Scorecard | None:
    """The scorecard at ``path`` when it exists and is valid, else ``None``."""
    from grader import schema

    try:
        card: Scorecard = json.loads(path.read_text("utf-8"))
        schema.validate("scorecard", card)
    except (OSError, ValueError):
        return None
    return card


def stale(
    card: Scorecard | None,
    *,
    sha256: str,
    assignment: str,
    exercise_ids: list[str],
    grading: dict[str, str],
) -> list[str]:
    """Why ``card`` does not already grade this content, assignment and exercise set with what
    decides a grade now (``grading``: :func:`grader.fingerprint.record`); [] when it does. The
    reasons are keys of :data:`REASONS` (``grader.fingerprint.REASONS`` names the parts)."""
    if card is None or not sha256:
        return ["new"]
    error = card["error"]
    if card["status"] == "error" and error is not None and error["kind"] in RETRY_KINDS:
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


class Shelf(Collection[tuple[str, AnyCard]]):
    """The scorecards of ``keys`` in the batch folder ``out``, in order, each read from disk when it
    is reached and let go after: what the exports walk instead of a list of whole cards (each about
    160 KB of Python objects).

    Not validated again: the engine validated each one as it wrote it (or, for an unchanged
    submission, when it read it back to plan the run). One that is gone or unreadable now is a
    grader fault: a rerun regrades it."""

    def __init__(self, out: Path, keys: list[str]) -> None:
        self.out, self.keys = out, keys

    def __len__(self) -> int:
        return len(self.keys)

    def __contains__(self, item: object) -> bool:
        return any(item == pair for pair in self)  # a (key, card) pair, as in a list of them

    def __iter__(self) -> Iterator[tuple[str, AnyCard]]:
        for key in self.keys:
            yield key, self._read(key)

    def _read(self, key: str) -> AnyCard:
        path = card_path(self.out, key)
        try:
            card: AnyCard = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError) as exc:
            raise GraderFault(
                f"{path}: the scorecard written in this run cannot be read back ({exc}); "
                "run the same command again: it regrades what is missing"
            ) from None
        return card
