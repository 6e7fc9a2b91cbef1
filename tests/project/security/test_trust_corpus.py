"""Both sides of the integrity check, measured on corpora (tests/project/support/trust_corpus.py):

- honest styles (tests/corpus/honest, at least 40): no finding that withholds, and full marks in-process with the
  runtime ban on (a review finding is allowed: it costs nothing);
- evasions (tests/corpus/hostile/integrity, .../structure): each caught as its docstring says: withheld, or a review
  finding on the attacked file (their runtime refusal in the sandbox, forked and cold: test_hostile_class*.py; the
  structure tricks: test_structure_reads.py). benchmarks/integrity.py prints the same figures and grades every
  student end to end in the sandbox.
"""

from __future__ import annotations

import pytest

from grader.course import manifest
from grader.grade import grade
from grader.intake import submission as intake
from grader.scoring import withhold
from tests.project.support import trust_corpus
from tests.project.support.common import grade_inprocess

pytestmark = pytest.mark.cost(55)  # seconds on 2 cores: started early (tests/project/conftest.py)

HONEST = trust_corpus.honest()
EVASIONS = trust_corpus.evasions()
ASSIGNMENTS = {a.id: a for a in manifest.load_all()}


def _verdict(student: trust_corpus.Student, tmp_path) -> withhold.Review:
    assignment = ASSIGNMENTS[student.assignment]
    path = student.stage(tmp_path / student.name)
    taken = intake.take(path, modules={e.module for e in assignment.exercises})
    try:
        return withhold.review(taken.box, assignment, taken.single_module)
    finally:
        taken.cleanup()


def test_the_corpora_are_large_and_cover_every_kind_of_exercise():
    assert len(HONEST) >= 40 and len(EVASIONS) >= 25
    basics = set(manifest.load().ids())
    assert basics <= {e for s in HONEST for e in s.exercises}, (
        "an exercise of attention-basics has no honest style"
    )
    assert {s.caught for s in EVASIONS} == {"withhold", "review", "test"}


@pytest.mark.parametrize("student", HONEST, ids=lambda s: s.name)
def test_no_honest_style_is_withheld(student, tmp_path):
    verdict = _verdict(student, tmp_path)
    assert verdict.withheld == {} and all(f.severity == "review" for f in verdict.findings), (
        verdict.findings
    )


@pytest.mark.parametrize("student", [s for s in HONEST if not s.single], ids=lambda s: s.name)
def test_every_honest_style_keeps_full_marks_with_the_runtime_ban_on(student, tmp_path):
    scores = grade_inprocess(
        student.stage(tmp_path / "sub"),
        ASSIGNMENTS[student.assignment],
        exercises=list(student.exercises),
    )
    assert {ex: s for ex, s in scores.items() if s[0] != s[1]} == {}


def test_a_one_file_submission_keeps_full_marks_and_has_no_finding(tmp_path):
    (student,) = [s for s in HONEST if s.single]
    card = grade(
        student.stage(tmp_path / "sub"),
        isolation="inprocess",
        seed=5,
        exercises=["softmax", "scaled_dot_product", "causal_attention", "efficient_attention"],
    )
    assert card["integrity"] == [] and card["score"] == card["max_score"] == 42, card["score"]


@pytest.mark.parametrize("student", EVASIONS, ids=lambda s: s.name)
def test_each_evasion_is_caught_as_its_docstring_says(student, tmp_path):
    verdict = _verdict(student, tmp_path)
    (exercise,) = student.exercises
    own = [f for f in verdict.findings if f.file == f"{student.module}.py"]
    assert all(f.file == f"{student.module}.py" for f in verdict.findings), (
        verdict.findings
    )  # the rest is honest
    if student.caught == "withhold":
        assert set(verdict.withheld) == {exercise} and any(exercise in f.exercises for f in own), (
            verdict.findings
        )
    elif student.caught == "review":
        assert verdict.withheld == {} and any(f.severity == "review" for f in own), verdict.findings
    else:  # caught by a hidden test, by behaviour (test_structure_reads.py runs it)
        assert verdict.withheld == {}
