"""Submissions that compute no attention earn nothing: every hidden point is anchored to an oracle's values.

The family (see ``tests/project/support/nonsolutions.py``) keeps the reference's names, signatures, parameters and
buffers, so every structure or property check (shapes, dtypes, a buffer named ``mask``, rows summing to 1,
causality, determinism) is satisfied; only a value check against an oracle can refuse them.
"""

from __future__ import annotations

import pytest

from grader.scoring.runner import run_suites
from tests.project.support import nonsolutions
from tests.project.support.common import grade_inprocess


@pytest.mark.parametrize("kind", nonsolutions.ALL)
def test_a_non_solution_scores_zero_on_every_exercise(tmp_path, assignment, kind):
    scores = grade_inprocess(nonsolutions.build(kind, tmp_path / kind), assignment)
    earned = {exercise: score for exercise, (score, _) in scores.items() if score > 0}
    if (
        kind in nonsolutions.SUBSTITUTED
    ):  # their wrapper is the reference's, unchanged: see the test below
        earned.pop("multihead_attention", None)
    assert not earned, f"the non-solution {kind!r} earned points: {earned}"
    assert sum(max_score for _, max_score in scores.values()) == pytest.approx(
        assignment.max_points
    )


@pytest.mark.parametrize("kind", nonsolutions.SUBSTITUTED)
def test_a_substituted_non_solution_earns_only_its_untouched_wrapper(tmp_path, assignment, kind):
    """A substituted submission fakes the softmax; its MultiHeadAttentionWrapper is the reference's own code (it
    computes no softmax: it concatenates its heads). The wrapper is graded with the grader's stand-in heads,
    so it earns the wrapper's points, and only those: the fake softmax is charged in causal_attention."""
    exercise = assignment.exercise("multihead_attention")
    results, _ = run_suites(
        [assignment.root / exercise.hidden_tests],
        student=nonsolutions.build(kind, tmp_path / kind),
        seed=1234,
    )
    passed = {r.name for r in results if r.outcome == "passed"}
    wrapper = {r.name for r in results if r.name.startswith("test_wrapper_")}
    assert wrapper and passed == wrapper, f"passed: {sorted(passed)}"


def test_the_family_keeps_the_reference_structure(tmp_path):
    """They only prove something if they pass the structure checks: the parameters and buffers nn.Module's own
    registries hold. ``structure_only`` merely claims them (overridden named_buffers/state_dict around an unregistered
    reference): structure is read from the registries (grader/inside/structure.py), so its claim shows nothing."""
    from grader.inside.executor import Executor

    expected = {
        "W_query.weight",
        "W_key.weight",
        "W_value.weight",
        "out_proj.weight",
        "out_proj.bias",
    }
    for kind in nonsolutions.ALL:
        executor = Executor(nonsolutions.build(kind, tmp_path / kind))
        handle = executor.call("multihead_attention", "MultiHeadAttention", (8, 8, 6, 0.1, 2), {})
        buffers, params, state = (
            executor.method(handle.id, m, (), {})
            for m in ("named_buffers", "named_parameters", "state_dict")
        )
        if (
            kind == "structure_only"
        ):  # on 4ad1d57 (methods asked of the student's code) it showed the reference's
            assert "mask" not in buffers and not set(params) & expected and "mask" not in state, (
                kind
            )
            continue
        assert "mask" in buffers and set(params) == expected and "mask" in state, kind
