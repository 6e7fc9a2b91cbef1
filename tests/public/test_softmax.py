"""Public tests for `softmax`: the book's worked example and the overflow that motivates the stable version."""

from __future__ import annotations

import pytest
import torch

from grader.testing.checks import expect_finite, expect_tensor

pytestmark = pytest.mark.exercise("softmax")

# Seed 001 ("Your journey starts with one step"): the scores of query x^2 and their softmax.
SCORES_2 = torch.tensor([0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865])
WEIGHTS_2 = torch.tensor([0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581])


@pytest.mark.points(2)
def test_naive_softmax_gives_the_books_weights(student):
    got = student.softmax.softmax_naive(SCORES_2, dim=0)
    expect_tensor(got, WEIGHTS_2, what="softmax_naive(attn_scores_2, dim=0)", atol=1e-4, rtol=0,
                  hint="exp(x) divided by the sum of exp(x) along dim")
    got = student.softmax.softmax_naive(SCORES_2[None])  # a (1, 6) row, default dim
    expect_tensor(got, WEIGHTS_2[None], what="softmax_naive(attn_scores_2[None]) with the default dim", atol=1e-4,
                  rtol=0, hint="keep the signature softmax_naive(x, dim=-1): the default dim is the last one")


@pytest.mark.points(2)
def test_stable_softmax_gives_the_books_weights(student):
    got = student.softmax.softmax_stable(SCORES_2, dim=0)
    expect_tensor(got, WEIGHTS_2, what="softmax_stable(attn_scores_2, dim=0)", atol=1e-4, rtol=0)


@pytest.mark.points(2)
def test_stable_softmax_survives_large_inputs(student):
    x = torch.tensor([[1000.0, 999.0, -1000.0]])
    got = student.softmax.softmax_stable(x, dim=-1)
    expect_finite(got, what="softmax_stable([[1000, 999, -1000]])",
                  hint="exp(1000) overflows: subtract the row maximum before exponentiating")
    expect_tensor(got, torch.tensor([[0.7310586, 0.2689414, 0.0]]), what="softmax_stable([[1000, 999, -1000]])")
