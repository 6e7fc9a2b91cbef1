"""``summary.json`` in one pass over the class: each scorecard is read once, folded into small
tallies, and let go.

A batch of 1,000 holds 1,000 whole scorecards only if something keeps them (about 160 KB of Python
objects each): the summary keeps per student what its row shows
(:func:`grader.exports.students.row`), per exercise and per test their counts, and per mistake its
students, so the cards can come one at a time from disk (:class:`grader.batch.cards.Shelf`). Every
card is first made safe text (:func:`outputs.clean_tree`).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from grader import __version__, safetext, schema
from grader.cardtypes import AnyCard
from grader.course import manifest
from grader.exports import lastrun, students
from grader.exports.outputs import clean_tree, identical, stubs_sha256
from grader.intake.roster import Student
from grader.sandbox.levels import BackendName
from grader.scoring import scorecard

SLOWEST = 10  # the slowest submissions the summary names


@dataclass(frozen=True)
class Seen:
    """What the summary keeps of one scorecard besides its row."""

    key: str
    status: str
    score: float
    max_score: float
    timeouts: int
    sha256: str
    total_s: float
    error: dict[str, str] | None
    cuda: str | None


@dataclass
class ExerciseTally:
    """Per exercise, in the order first seen: its scores, full marks, and each counted test's
    passes."""

    exercises: dict[str, dict[str, Any]] = field(default_factory=dict)
    tests: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)

    def add(self, card: AnyCard) -> None:
        for ex in card["exercises"]:
            e = self.exercises.setdefault(
                ex["id"],
                {"title": ex["title"], "max_score": ex["max_score"], "scores": [], "full": 0},
            )
            e["scores"].append(ex["score"])
            e["full"] += ex["max_score"] > 0 and ex["score"] >= ex["max_score"]
            tests = self.tests.setdefault(ex["id"], {})
            for t in (t for t in ex["tests"] if t["counted"]):
                self.names[t["id"]] = t["name"]
                tally = tests.setdefault(t["id"], [0, 0])
                tally[0] += t["outcome"] == "passed"
                tally[1] += 1

    def document(self) -> list[dict[str, Any]]:
        return [self._exercise(ex_id, e) for ex_id, e in self.exercises.items()]

    def _exercise(self, ex_id: str, e: dict[str, Any]) -> dict[str, Any]:
        n = len(e["scores"])
        return {
            "id": ex_id,
            "title": e["title"],
            "max_score": e["max_score"],
            "mean_score": _r(statistics.fmean(e["scores"])) if n else 0,
            "pass_rate": _r(e["full"] / n) if n else 0,
            "tests": [
                {
                    "id": tid,
                    "name": self.names[tid],
                    "passed": p,
                    "total": t,
                    "pass_rate": _r(p / t) if t else 0,
                }
                for tid, (p, t) in self.tests[ex_id].items()
            ],
        }


@dataclass
class Tally:
    """The class so far: :meth:`add` each (key, card); :func:`summarize` makes the document from
    it."""

    exercise_ids: list[str]
    seen: list[Seen] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    exercises: ExerciseTally = field(default_factory=lambda: ExerciseTally())
    mistakes: students.Mistakes = field(default_factory=lambda: students.Mistakes())

    def add(self, key: str, card: AnyCard) -> None:
        key, card = safetext.name(key), clean_tree(card)
        self.seen.append(_seen(key, card))
        self.rows.append(students.row(key, card, self.exercise_ids))
        if card["status"] == "graded":
            self.exercises.add(card)
            self.mistakes.add(key, card)

    @property
    def graded(self) -> list[Seen]:
        return [s for s in self.seen if s.status == "graded"]


def _seen(key: str, card: AnyCard) -> Seen:
    error = card["error"] if card["status"] == "error" else None
    return Seen(
        key=key,
        status=card["status"],
        score=card["score"],
        max_score=card["max_score"],
        timeouts=sum(i["kind"] == "timeout" for i in card["incidents"]),
        sha256=card["submission"]["sha256"],
        total_s=card["timings"]["total_s"],
        error={"kind": error["kind"], "message": error["message"][:500]} if error else None,
        cuda=card["environment"].get("cuda") if card["status"] == "graded" else None,
    )


def summarize(
    named: Iterable[tuple[str, AnyCard]],
    *,
    assignment: manifest.Assignment,
    backend: BackendName,
    slots: int,
    wall_s: float,
    skipped: int,
    timing: dict[str, Any] | None = None,
    roster: list[Student] | None = None,
    previous: dict[str, Any] | None = None,
    exercise_ids: list[str] | None = None,
) -> dict[str, Any]:
    """The ``summary`` document (schema ``summary``): counts, score distribution, pass rates,
    students, mistakes.

    ``named`` is read once. ``previous`` is the summary this one replaces: when this run graded
    nothing (every submission unchanged), its ``last_graded_run`` figures are kept instead of a run
    that measured nothing.
    """
    tally = Tally(list(exercise_ids or assignment.ids()))
    for key, card in named:
        tally.add(key, card)
    count = len(tally.seen) - skipped
    doc = {
        "schema_version": 3,
        "assignment": assignment.id,
        "title": assignment.title,
        "grader": {"version": __version__},
        "generated": scorecard.now(),
        "isolation": backend,
        "slots": slots,
        "wall_s": round(wall_s, 3),
        "submissions_per_minute": lastrun.rate(count, wall_s),
        **_class_figures(tally, assignment, roster, skipped),
        "timing": timing or {},
        "last_graded_run": lastrun.figures(count, wall_s, slots, previous),
    }
    if roster is not None:
        doc["roster"] = _roster(tally, roster)
    schema.validate("summary", doc)
    return doc


def _class_figures(
    tally: Tally, assignment: manifest.Assignment, roster: list[Student] | None, skipped: int
) -> dict[str, Any]:
    """Everything the tally decides: counts, scores, exercises, mistakes, students, groups."""
    seen, graded = tally.seen, tally.graded
    max_score = max((s.max_score for s in graded or seen), default=assignment.max_points)
    hashes = [(s.key, {"submission": {"sha256": s.sha256}}) for s in seen]
    groups = identical(hashes, ignore=stubs_sha256(assignment))
    missing = _missing(tally, roster)
    return {
        "counts": _counts(tally, skipped, len(missing)),
        "score": _scores(graded, max_score),
        "histogram": _histogram(graded),
        "exercises": tally.exercises.document(),
        "common_failures": tally.mistakes.ranked(),
        "errors": [{"student": s.key, **s.error} for s in seen if s.error is not None],
        "timeouts": [{"student": s.key, "count": s.timeouts} for s in seen if s.timeouts],
        "slowest": [
            {"student": s.key, "total_s": s.total_s}
            for s in sorted(seen, key=lambda s: -s.total_s)[:SLOWEST]
        ],
        "cuda": _cuda(graded),
        "identical_submissions": groups,
        "students": students.grouped(tally.rows, groups)
        + [students.missing_row(s.key, s.login, tally.exercise_ids, max_score) for s in missing],
    }


def _missing(tally: Tally, roster: list[Student] | None) -> list[Student]:
    keys = {s.key for s in tally.seen}
    return [s for s in roster or [] if s.key not in keys]


def _roster(tally: Tally, roster: list[Student]) -> dict[str, Any]:
    keys = {s.key for s in tally.seen}
    return {
        "students": len(roster),
        "missing": [s.key for s in _missing(tally, roster)],
        "not_on_roster": sorted(keys - {s.key for s in roster}),
    }


def _counts(tally: Tally, skipped: int, missing: int) -> dict[str, int]:
    seen, graded = tally.seen, tally.graded
    return {
        "submissions": len(seen),
        "graded": len(graded),
        "errors": len(seen) - len(graded),
        "skipped": skipped,
        "timeouts": sum(1 for s in seen if s.timeouts),
        "full_marks": sum(1 for s in graded if s.max_score and s.score >= s.max_score),
        "missing": missing,
    }


def _scores(graded: list[Seen], max_score: float) -> dict[str, float]:
    points = [s.score for s in graded]
    pcts = [_pct(s) for s in graded]
    return {
        "max_score": max_score,
        "mean": _r(statistics.fmean(points)) if points else 0,
        "median": _r(statistics.median(points)) if points else 0,
        "min": min(points, default=0),
        "max": max(points, default=0),
        "mean_percent": _r(statistics.fmean(pcts)) if pcts else 0,
    }


def _histogram(graded: list[Seen]) -> list[dict[str, int]]:
    bins = [0] * 10
    for s in graded:
        bins[min(int(_pct(s) // 10), 9)] += 1
    return [{"from": 10 * i, "to": 10 * i + 10, "count": n} for i, n in enumerate(bins)]


def _pct(seen: Seen) -> float:
    return 100.0 * seen.score / seen.max_score if seen.max_score else 0.0


def _cuda(graded: list[Seen]) -> dict[str, Any]:
    """Who was graded where CUDA was available: each graded card whose ``environment.cuda`` names a
    device."""
    found = [{"student": s.key, "device": s.cuda} for s in graded if s.cuda]
    return {"graded": len(found), "submissions": found}


def _r(x: float) -> float:
    return round(x, 3)
