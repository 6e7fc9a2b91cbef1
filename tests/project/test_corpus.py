"""The hidden suites against known code: solutions score 100, stubs 0, every corpus bug loses points."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.project.conftest import CORPUS, ROOT, grade_inprocess, solutions_copy

BUGS = sorted(CORPUS.glob("buggy/*/*.py"))


@pytest.mark.parametrize("suite", ["hidden", "public"])
def test_reference_solutions_score_full_marks(tmp_path, assignment, suite):
    scores = grade_inprocess(solutions_copy(tmp_path / "sub"), assignment, suite=suite)
    lost = {ex: s for ex, s in scores.items() if s[0] != s[1]}
    assert not lost, f"reference lost points on the {suite} suite: {lost}"
    assert sum(s[1] for s in scores.values()) == pytest.approx(assignment.max_points)


@pytest.mark.parametrize("suite", ["hidden", "public"])
def test_untouched_stubs_score_zero_without_crashing(assignment, suite):
    scores = grade_inprocess(ROOT / "exercises", assignment, suite=suite)
    assert sum(s[0] for s in scores.values()) == 0, scores
    assert sum(s[1] for s in scores.values()) == pytest.approx(assignment.max_points)


@pytest.mark.parametrize("bug", BUGS, ids=[f"{p.parent.name}/{p.stem}" for p in BUGS])
def test_each_corpus_bug_loses_points_on_its_exercise(tmp_path, assignment, bug: Path):
    exercise = assignment.exercise(bug.parent.name)
    sub = solutions_copy(tmp_path / "sub")
    shutil.copy(bug, sub / f"{exercise.module}.py")
    score, max_score = grade_inprocess(sub, assignment, exercises=[exercise.id])[exercise.id]
    assert max_score == exercise.points
    assert score < max_score, f"{bug.name} ({bug.read_text().splitlines()[0]}) kept all {score} points"


def test_corpus_covers_every_exercise(assignment):
    covered = {p.parent.name for p in BUGS}
    assert covered == set(assignment.ids()), f"exercises without buggy implementations: {set(assignment.ids()) - covered}"
