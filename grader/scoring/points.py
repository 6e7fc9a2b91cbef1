"""Sum per-test results into per-exercise scores (CUDA tests that could not run are left out).

An exercise whose code has an integrity finding keeps its tests but not its points
(:func:`withhold`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from grader.course.manifest import Assignment
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
    """A CUDA test skipped for want of a device is listed but not counted, unless CUDA is
    required."""
    return not (result.cuda and result.outcome == "skipped" and not require_cuda)


# an exercise whose output is unusable for some ordinary inputs keeps at most half its points
SEVERE_CAP = 0.5


def cap(score: ExerciseScore) -> None:
    """A failed ``severe`` test caps the exercise when its failure is of the class the test names
    (an output that overflows for inputs of ordinary size: the test confirms that the same call
    works at ordinary scale and breaks at large scale,
    :func:`grader.testing.regimes.expect_stable`): such a bug ruins training however many other
    tests pass. Any other failure there (an exception that ordinary inputs raise too, a wrong shape,
    finite wrong values) costs that test's points only: the cap names what breaks, and a bug it does
    not describe must not be told "your softmax overflows"."""
    failed = [t for t in score.tests if t.severe and t.outcome in ("failed", "error") and t.caps]
    if failed and score.score > score.max_score * SEVERE_CAP:
        score.score = round(score.max_score * SEVERE_CAP, 6)
        score.capped = (
            f"capped at {SEVERE_CAP:.0%} of its points: {failed[0].severe} ({failed[0].name} failed: "
            f"{failed[0].caps})"
        )
        for test in failed:  # the student sees why in the test's own feedback too
            test.message = f"{test.message}\n(severe: this failure caps the exercise at {SEVERE_CAP:.0%} of its points)"


def withhold(score: ExerciseScore, reason: str) -> None:
    """Keep the tests (they are shown) but not the points: see :mod:`grader.scoring.withhold`."""
    score.score, score.withheld = 0.0, reason


def exercise_scores(
    results: Iterable[TestResult], assignment: Assignment, *, require_cuda: bool = False
) -> list[ExerciseScore]:
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
