"""Sum per-test results into per-exercise scores (CUDA tests that could not run are left out).

An exercise whose code has an integrity finding keeps its tests but not its points (:func:`withhold`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from grader.manifest import Assignment
from grader.scoring.collect import TestResult


@dataclass(slots=True)
class ExerciseScore:
    id: str
    title: str
    score: float = 0.0
    max_score: float = 0.0
    tests: list[TestResult] = field(default_factory=list)
    withheld: str | None = None  # why the points were withheld (an integrity finding), if they were
    capped: str | None = None  # why the score was capped (a failed ``severe`` test), if it was


def counts_toward_max(result: TestResult, *, require_cuda: bool) -> bool:
    """A CUDA test skipped for want of a device is listed but not counted, unless CUDA is required."""
    return not (result.cuda and result.outcome == "skipped" and not require_cuda)


SEVERE_CAP = 0.5  # an exercise whose output is unusable for some ordinary inputs keeps at most half its points


def cap(score: ExerciseScore) -> None:
    """A failed ``severe`` test (e.g. NaN for inputs of size 30) caps the exercise: such a bug ruins training
    however many other tests pass, so it must cost more than its one test's share. Not when all it got wrong
    was finite values: the cap names what breaks, and a wrong scale that the large inputs reveal on some draws
    and not on others must cost that test's points, not half the exercise on some runs."""
    failed = [t for t in score.tests if t.severe and t.outcome in ("failed", "error") and not t.finite_values_differ]
    if failed and score.score > score.max_score * SEVERE_CAP:
        score.score = round(score.max_score * SEVERE_CAP, 6)
        score.capped = f"capped at {SEVERE_CAP:.0%} of its points: {failed[0].severe} ({failed[0].name} failed)"
        for test in failed:  # the student sees why in the test's own feedback too
            test.message = f"{test.message}\n(severe: this failure caps the exercise at {SEVERE_CAP:.0%} of its points)"


def withhold(score: ExerciseScore, reason: str) -> None:
    """Keep the tests (they are shown) but not the points: see :mod:`grader.scoring.withhold`."""
    score.score, score.withheld = 0.0, reason


def exercise_scores(results: Iterable[TestResult], assignment: Assignment, *,
                    require_cuda: bool = False) -> list[ExerciseScore]:
    scores = {e.id: ExerciseScore(e.id, e.title) for e in assignment.exercises}
    for result in results:
        if result.exercise not in scores:
            continue
        entry = scores[result.exercise]
        entry.tests.append(result)
        if counts_toward_max(result, require_cuda=require_cuda):
            entry.max_score += result.max_points
            entry.score += result.points
    for entry in scores.values():
        cap(entry)
    return list(scores.values())
