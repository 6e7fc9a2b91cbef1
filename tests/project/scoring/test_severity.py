"""Penalties follow severity: a failed `severe` test caps its exercise at half its points, and says why."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader import schema
from grader.course import manifest
from grader.scoring import scorecard
from grader.scoring.collect import TestResult
from grader.scoring.points import SEVERE_CAP, exercise_scores
from grader.scoring.runner import run_suites
from tests.project.support.common import ROOT, grade_inprocess, solutions_copy

NAIVE = "import torch as _t\ndef _naive(x, dim=-1, **kw):\n    e = _t.exp(x)\n    return e / e.sum(dim, keepdim=True)\n"


OVERFLOWED = "got 3 NaN/inf value(s) on large scores, finite values on ordinary ones"


def _results(
    severe_outcome: str, other_failed: int = 0, caps: str | None = OVERFLOWED
) -> list[TestResult]:
    tests = [
        TestResult(
            id=f"t{i}",
            name=f"t{i}",
            exercise="softmax",
            max_points=1.0,
            outcome="failed" if i < other_failed else "passed",
        )
        for i in range(5)
    ]
    tests.append(
        TestResult(
            id="big",
            name="test_big",
            exercise="softmax",
            max_points=1.0,
            outcome=severe_outcome,
            severe="NaN for inputs of size 30",
            caps=caps if severe_outcome == "failed" else None,
        )
    )
    return tests


def test_a_failed_severe_test_caps_the_exercise_at_half(assignment):
    (score,) = [s for s in exercise_scores(_results("failed"), assignment) if s.id == "softmax"]
    assert (score.score, score.max_score) == (3.0, 6.0)  # 5 of 6 passed, capped to half
    assert "NaN for inputs of size 30" in score.capped and "test_big" in score.capped
    assert OVERFLOWED in score.capped  # what was observed, not only what the cap is for


@pytest.mark.parametrize("outcome", ["passed", "skipped"])
def test_a_severe_test_that_did_not_fail_caps_nothing(assignment, outcome):
    (score,) = [s for s in exercise_scores(_results(outcome), assignment) if s.id == "softmax"]
    assert score.capped is None
    assert score.score == 6.0 if outcome == "passed" else score.score == 5.0


def test_a_severe_test_failed_by_something_else_costs_its_points_and_caps_nothing(assignment):
    """Finite wrong values, a wrong shape, an exception that ordinary inputs raise too: not the cap's class."""
    (score,) = [
        s for s in exercise_scores(_results("failed", caps=None), assignment) if s.id == "softmax"
    ]
    assert (score.score, score.max_score, score.capped) == (5.0, 6.0, None)


def test_a_score_already_below_the_cap_is_kept(assignment):
    (score,) = [
        s
        for s in exercise_scores(_results("failed", other_failed=4), assignment)
        if s.id == "softmax"
    ]
    assert score.score == 1.0 and score.capped is None


def test_the_cap_is_written_to_a_valid_scorecard(assignment):
    scores = [s for s in exercise_scores(_results("failed"), assignment) if s.id == "softmax"]
    isolation = {
        "backend": "inprocess",
        "uid": 0,
        "limits": {},
        "cgroup": "none",
        "seccomp": False,
        "threads": 1,
        "file_view": "inprocess",
        "attested": False,
    }
    card = scorecard.new(
        assignment=assignment.id, max_score=6.0, path="x", isolation=isolation, seed=1
    )
    card = scorecard.finished(scorecard.scored(card, scores, require_cuda=False), seconds=0.1)
    assert card["exercises"][0]["capped"].startswith(f"capped at {SEVERE_CAP:.0%}")
    schema.validate("scorecard", card)


MODERN = manifest.load(assignment="attention-modern")


@pytest.mark.parametrize(
    "module",
    [
        "scaled_dot_product",
        "causal_attention",
        "cross_attention",
        "self_attention",
        "grouped_query_attention",
        "kv_cache",
        "sliding_window",
    ],
)
def test_a_naive_exp_softmax_costs_half_the_exercise(tmp_path, assignment, module):
    """Every hidden suite that computes a softmax marks its large-input test severe: an overflow costs 50%."""
    assignment = MODERN if module in MODERN.ids() else assignment
    sub = solutions_copy(tmp_path / "sub")
    source = (ROOT / "solutions" / f"{module}.py").read_text().replace("torch.softmax(", "_naive(")
    head, sep, tail = source.partition("\nimport ")
    (sub / f"{module}.py").write_text(head + "\n" + NAIVE + sep + tail)
    score, max_score = grade_inprocess(sub, assignment, exercises=[module])[module]
    assert score == pytest.approx(max_score * SEVERE_CAP)


def test_every_hidden_suite_with_a_softmax_has_a_severe_test():
    for suite in sorted((ROOT / "tests" / "hidden").glob("test_*.py")):
        if suite.stem not in (
            "test_masks",
            "test_rope",
        ):  # masks and rotations: no softmax of their own
            assert "@pytest.mark.severe(" in suite.read_text(), suite.name


def test_the_student_sees_the_cap_in_the_failed_tests_feedback(assignment):
    results = _results("failed")
    exercise_scores(results, assignment)
    assert "caps the exercise at 50%" in results[-1].message
    assert all("caps" not in r.message for r in results[:-1])


def test_a_capped_exercise_s_test_points_add_up_to_its_score(assignment):
    scores = [s for s in exercise_scores(_results("failed"), assignment) if s.id == "softmax"]
    (entry,) = scorecard.exercise_entries(scores, require_cuda=False)
    assert sum(t["points"] for t in entry["tests"]) == pytest.approx(entry["score"]) == 3.0


def _causal_scores(
    sub: Path, assignment: manifest.Assignment, seed: int
) -> tuple[float, float, str | None, dict]:
    results, _ = run_suites(
        [assignment.root / assignment.exercise("causal_attention").hidden_tests],
        student=sub,
        seed=seed,
        assignment=assignment,
    )
    (score,) = [s for s in exercise_scores(results, assignment) if s.id == "causal_attention"]
    return score.score, score.max_score, score.capped, {r.name: r for r in results}


CLAMPED = "import torch as _t\ndef _clamped(x, dim=-1, **kw):\n    return _t.softmax(x.clamp(max=50), dim=dim)\n"


def _with_softmax(sub: Path, helper: str, name: str) -> None:
    """The solutions' causal_attention.py with torch.softmax replaced by the function ``name`` of ``helper``."""
    source = (
        (ROOT / "solutions" / "causal_attention.py")
        .read_text()
        .replace("torch.softmax(", f"{name}(")
    )
    head, sep, tail = source.partition("\nimport ")
    (sub / "causal_attention.py").write_text(head + "\n" + helper + sep + tail)


@pytest.mark.parametrize("seed", [1, 2])
def test_finite_wrong_values_in_the_severe_test_cost_its_points_never_the_cap(
    tmp_path, assignment, seed
):
    """Clamping the scores (a learner's "fix" for overflow) is finite and right for ordinary inputs, wrong for large
    ones: the large-input test fails on every draw, and costs its own points, not half the exercise."""
    sub = solutions_copy(tmp_path / "sub")
    _with_softmax(sub, CLAMPED, "_clamped")
    score, max_score, capped, tests = _causal_scores(sub, assignment, seed)
    big = tests["test_large_inputs_do_not_overflow"]
    assert big.outcome == "failed" and big.caps is None and "values differ" in big.message, big
    lost = sum(t.max_points for t in tests.values() if t.outcome != "passed" and not t.cuda)
    assert capped is None and score == pytest.approx(
        max_score - lost
    )  # each failed test its own points, no more


RAISES_ON_OVERFLOW = (
    "import torch as _t\ndef _naive(x, dim=-1, **kw):\n    e = _t.exp(x)\n    out = e / e.sum(dim, "
    "keepdim=True)\n    if not bool(_t.isfinite(out).all()):\n"
    "        raise FloatingPointError('overflow')\n    return out\n"
)


@pytest.mark.parametrize(
    "helper", [NAIVE, RAISES_ON_OVERFLOW], ids=["returns_nan", "raises_instead"]
)
def test_an_overflow_is_capped_whether_it_returns_nan_or_raises(tmp_path, assignment, helper):
    """Raising where the outputs would be NaN is no way around the cap."""
    sub = solutions_copy(tmp_path / "sub")
    _with_softmax(sub, helper, "_naive")
    score, max_score, capped, tests = _causal_scores(sub, assignment, seed=5)
    assert tests["test_large_inputs_do_not_overflow"].outcome == "failed"
    assert capped and score == pytest.approx(max_score * SEVERE_CAP)


CUT = "def _cut(x, dim=-1, **kw):\n    return x.softmax(dim)[..., :-1]\n"


def test_an_exception_ordinary_inputs_raise_too_costs_the_test_never_the_cap(tmp_path, assignment):
    """A softmax that drops the last key makes the forward raise on every input, the severe test's included; it
    does not overflow: no cap, and the message never says it does."""
    sub = solutions_copy(tmp_path / "sub")
    _with_softmax(sub, CUT, "_cut")
    _, _, capped, tests = _causal_scores(sub, assignment, seed=5)
    big = tests["test_large_inputs_do_not_overflow"]
    assert big.outcome == "failed" and big.caps is None and "overflow" not in big.message, big
    assert capped is None


def test_the_cap_says_what_it_observed(tmp_path, assignment):
    sub = solutions_copy(tmp_path / "sub")
    _with_softmax(sub, NAIVE, "_naive")
    _, _, capped, tests = _causal_scores(sub, assignment, seed=5)
    assert "NaN/inf value(s) on large scores, finite values on ordinary ones" in capped, capped
    assert (
        "on ordinary-sized scores gives finite values"
        in tests["test_large_inputs_do_not_overflow"].message
    )
