"""Public tests for `softmax`: the book's worked example, batches of rows along either dim, the overflow that
motivates the stable version, and gradients."""

from __future__ import annotations

import pytest
import torch

from grader.testing.catalogue.softmax import softmax_suspects
from grader.testing.checks import expect_call, expect_finite
from grader.testing.gradients import expect_grads

pytestmark = pytest.mark.exercise("softmax")

# Seed 001 ("Your journey starts with one step"): the scores of query x^2 and their softmax.
SCORES_2 = torch.tensor([0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865])
WEIGHTS_2 = torch.tensor([0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581])
BATCH = torch.tensor([[0.2, -1.0, 0.5, 2.0, 0.0], [1.5, 0.3, -0.7, 0.1, 0.9], [-0.4, 0.8, 1.1, -2.0, 0.6]])


def softmax64(x: torch.Tensor, dim: int) -> torch.Tensor:
    x64 = x.double()
    e = torch.exp(x64 - x64.amax(dim=dim, keepdim=True))
    return (e / e.sum(dim=dim, keepdim=True)).to(x.dtype)


@pytest.mark.points(1.5)
def test_naive_softmax_gives_the_books_weights(student):
    naive = student.softmax.softmax_naive
    expect_call(lambda: naive(SCORES_2, dim=0), WEIGHTS_2, what="softmax_naive(attn_scores_2, dim=0)", atol=1e-4,
                rtol=0, suspects=softmax_suspects(SCORES_2, 0))
    row = SCORES_2[None]  # a (1, 6) row, default dim
    expect_call(lambda: naive(row), WEIGHTS_2[None], what="softmax_naive(attn_scores_2[None]) with the default dim",
                atol=1e-4, rtol=0, suspects=softmax_suspects(row, -1))


@pytest.mark.points(1)
def test_naive_softmax_of_a_batch_of_rows(student):
    for dim in (-1, 0):
        expect_call(lambda d=dim: student.softmax.softmax_naive(BATCH, dim=d), softmax64(BATCH, dim),
                    what=f"softmax_naive(x of shape (3, 5), dim={dim})", suspects=softmax_suspects(BATCH, dim))


@pytest.mark.points(1)
def test_stable_softmax_gives_the_books_weights_and_batches(student):
    stable = student.softmax.softmax_stable
    expect_call(lambda: stable(SCORES_2, dim=0), WEIGHTS_2, what="softmax_stable(attn_scores_2, dim=0)", atol=1e-4,
                rtol=0, suspects=softmax_suspects(SCORES_2, 0))
    expect_call(lambda: stable(BATCH), softmax64(BATCH, -1), what="softmax_stable(x of shape (3, 5)) with the "
                "default dim", suspects=softmax_suspects(BATCH, -1))
    # dim=0 on a batch: a max or a sum that ignores `dim` agrees with the right one on 1-D input only
    expect_call(lambda: stable(BATCH, dim=0), softmax64(BATCH, 0), what="softmax_stable(x of shape (3, 5), dim=0)",
                suspects=softmax_suspects(BATCH, 0))


@pytest.mark.points(1.5)
def test_stable_softmax_survives_large_inputs(student):
    # two rows of very different size: one max over the whole tensor shifts the second row to exp(-2000) = 0
    x = torch.tensor([[1000.0, 999.0, -1000.0], [-1000.0, -999.0, -1001.0]])
    what = "softmax_stable([[1000, 999, -1000], [-1000, -999, -1001]])"
    got = expect_call(lambda: student.softmax.softmax_stable(x, dim=-1), softmax64(x, -1), what=what,
                      suspects=softmax_suspects(x, -1))
    expect_finite(got, what=what)


@pytest.mark.points(1)
def test_gradients_flow_through_both(student):
    x = BATCH.double()
    g = torch.linspace(-1.0, 1.0, 15, dtype=torch.float64).reshape(3, 5)
    for name in ("softmax_naive", "softmax_stable"):
        expect_grads(getattr(student.softmax, name), (x,), softmax64, g, what=f"{name}(float64 x, dim=-1) backward",
                     names=("x",), suspects=softmax_suspects(x, -1), dim=-1)
