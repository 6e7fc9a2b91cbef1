"""The hidden suites against known code: solutions score 100, stubs 0, every corpus bug loses points.

Every assignment of the manifest is covered; a bug file's folder names its exercise, and so its assignment."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from grader.course import manifest
from grader.scoring.points import exercise_scores
from grader.scoring.runner import run_suites
from grader.testing import misconceptions
from tests.project.support.common import CORPUS, ROOT, grade_inprocess, solutions_copy

pytestmark = pytest.mark.cost(100)  # seconds on 2 cores: started early (tests/project/conftest.py)

ASSIGNMENTS = {a.id: a for a in manifest.load_all()}
OWNER = {
    e.id: a for a in ASSIGNMENTS.values() for e in a.exercises
}  # exercise id -> its assignment
BUGS = sorted(CORPUS.glob("buggy/*/*.py"))


@pytest.mark.parametrize("suite", ["hidden", "public"])
@pytest.mark.parametrize("assignment_id", list(ASSIGNMENTS))
def test_reference_solutions_score_full_marks(tmp_path, assignment_id, suite):
    assignment = ASSIGNMENTS[assignment_id]
    scores = grade_inprocess(solutions_copy(tmp_path / "sub"), assignment, suite=suite)
    lost = {ex: s for ex, s in scores.items() if s[0] != s[1]}
    assert not lost, f"reference lost points on the {suite} suite: {lost}"
    assert sum(s[1] for s in scores.values()) == pytest.approx(assignment.max_points)


@pytest.mark.parametrize("suite", ["hidden", "public"])
@pytest.mark.parametrize("assignment_id", list(ASSIGNMENTS))
def test_untouched_stubs_score_zero_without_crashing(assignment_id, suite):
    assignment = ASSIGNMENTS[assignment_id]
    scores = grade_inprocess(ROOT / "exercises", assignment, suite=suite)
    assert sum(s[0] for s in scores.values()) == 0, scores
    assert sum(s[1] for s in scores.values()) == pytest.approx(assignment.max_points)


@pytest.mark.parametrize("bug", BUGS, ids=[f"{p.parent.name}/{p.stem}" for p in BUGS])
def test_each_corpus_bug_loses_points_on_its_exercise(tmp_path, bug: Path):
    assert bug.parent.name in OWNER, f"{bug.parent.name}: no exercise of that id in any assignment"
    assignment = OWNER[bug.parent.name]
    exercise = assignment.exercise(bug.parent.name)
    sub = solutions_copy(tmp_path / "sub")
    shutil.copy(bug, sub / f"{exercise.module}.py")
    # One lost point is all this asks: the run stops at the first failure (--maxfail=1) and is scored as far as
    # it went. A bug that fails nothing runs every test, so "kept all points" is still judged on the whole suite.
    results, _ = run_suites(
        [assignment.root / exercise.hidden_tests],
        student=sub,
        seed=1234,
        assignment=assignment,
        extra_args=["--maxfail=1"],
    )
    (scored,) = [s for s in exercise_scores(results, assignment) if s.id == exercise.id]
    assert scored.score < scored.max_score, (
        f"{bug.name} ({bug.read_text().splitlines()[0]}) kept all its points"
    )
    # the first failure never names a mistake the bug does not make (benchmarks/feedback.py's "misleading")
    first = next(r for r in results if r.outcome not in ("passed", "skipped"))
    found = misconceptions.DECLARED.search(ast.get_docstring(ast.parse(bug.read_text())) or "")
    assert found, f"{bug}: no 'Misconception: id' line in its docstring"
    assert misconceptions.verdict(found.group(1), first.message or "") != "misleading", (
        f"{bug.name} ({found.group(1)}): {first.name} names another mistake: {first.message}"
    )


@pytest.mark.parametrize("assignment_id", list(ASSIGNMENTS))
def test_corpus_covers_every_exercise(assignment_id):
    covered = {p.parent.name for p in BUGS}
    missing = set(ASSIGNMENTS[assignment_id].ids()) - covered
    assert not missing, f"exercises without buggy implementations: {missing}"


CAUSAL_BUGS = sorted(CORPUS.glob("buggy/causal_attention/*.py"))


@pytest.mark.parametrize("bug", CAUSAL_BUGS, ids=[p.stem for p in CAUSAL_BUGS])
def test_a_causal_attention_bug_is_charged_once(tmp_path, assignment, bug: Path):
    """The multi-head wrapper builds on CausalAttention; it is graded with stand-in heads, so a bug in the
    student's CausalAttention (even one that breaks the import) costs no multi-head points."""
    sub = solutions_copy(tmp_path / "sub")
    shutil.copy(bug, sub / "causal_attention.py")
    scores = grade_inprocess(sub, assignment, exercises=["causal_attention", "multihead_attention"])
    assert scores["causal_attention"][0] < scores["causal_attention"][1], (
        f"{bug.name} kept its causal points"
    )
    assert scores["multihead_attention"][0] == scores["multihead_attention"][1], (
        f"{bug.name} cost multi-head points"
    )


def test_an_unimportable_causal_attention_costs_no_multihead_points(tmp_path, assignment):
    sub = solutions_copy(tmp_path / "sub")
    (sub / "causal_attention.py").write_text("class CausalAttention(:\n")
    scores = grade_inprocess(sub, assignment, exercises=["causal_attention", "multihead_attention"])
    assert scores["causal_attention"][0] == 0
    assert scores["multihead_attention"][0] == scores["multihead_attention"][1]
