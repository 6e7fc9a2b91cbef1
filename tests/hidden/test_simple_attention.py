"""Hidden tests for `simple_attention`: float64 oracles on 2-D and batched inputs, row sums, equivariance."""

from __future__ import annotations

import pytest
import torch

from grader.testing.checks import expect_tensor
from grader.testing.gradients import expect_grads
from grader.testing.regimes import expect_stable

pytestmark = pytest.mark.exercise("simple_attention")

OVERFLOW = "outputs become inf or NaN for inputs of ordinary size (a softmax without the max subtracted)"

NAIVE_HINT = "subtract the row max before exp (or call torch.softmax): exp overflows to inf above 88.7 in float32"

T, D, B = 5, 3, 3  # T != d and B >= 2, so that `.T` on a 3-D tensor cannot give a matching shape


def oracle(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(scores, weights, context) by float64 hand computation, cast back to the input dtype."""
    x64 = x.double()
    scores = torch.einsum("...id,...jd->...ij", x64, x64)
    e = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    weights = e / e.sum(dim=-1, keepdim=True)
    context = torch.einsum("...ij,...jd->...id", weights, x64)
    return scores.to(x.dtype), weights.to(x.dtype), context.to(x.dtype)


SHAPES = {"2-D (T, d)": (T, D), "3-D (B, T, d)": (B, T, D)}


@pytest.mark.points(0.75)
@pytest.mark.parametrize("shape", list(SHAPES.values()), ids=list(SHAPES))
def test_scores_match_float64_oracle(student, gen, shape):
    x = torch.randn(*shape, generator=gen)
    got = student.simple_attention.attention_scores(x)
    expect_tensor(got, oracle(x)[0], what=f"attention_scores(x of shape {shape})",
                  hint="transpose only the last two dims (x.transpose(-2, -1)); on a 3-D tensor `.T` reverses all of them")


@pytest.mark.points(1)
@pytest.mark.parametrize("shape", list(SHAPES.values()), ids=list(SHAPES))
def test_weights_match_float64_oracle_and_rows_sum_to_one(student, gen, shape):
    x = torch.randn(*shape, generator=gen)
    scores = oracle(x)[0]
    got = student.simple_attention.attention_weights(scores)
    expect_tensor(got, oracle(x)[1], what=f"attention_weights(scores of shape {tuple(scores.shape)})",
                  hint="softmax over dim=-1 (the keys): dim=0 or dim=1 only works for one layout")
    sums = got.double().sum(dim=-1)
    expect_tensor(sums, torch.ones_like(sums), what="attention_weights(...).sum(dim=-1)", atol=1e-5, rtol=0,
                  hint="every query's row of weights must sum to 1")


@pytest.mark.points(0.5)
def test_weights_of_four_dim_scores_normalise_the_last_dim(student, gen):
    scores = torch.randn(2, 2, T, T, generator=gen)  # (B, H, T, T), as in multi-head attention later
    got = student.simple_attention.attention_weights(scores)
    e = torch.exp(scores.double() - scores.double().amax(dim=-1, keepdim=True))
    expect_tensor(got, (e / e.sum(dim=-1, keepdim=True)).float(), what="attention_weights(scores of shape (2, 2, 5, 5))",
                  hint="use dim=-1, which is the key dimension whatever the number of leading dims")


@pytest.mark.points(0.75)
@pytest.mark.parametrize("shape", list(SHAPES.values()), ids=list(SHAPES))
def test_context_vectors_match_float64_oracle(student, gen, shape):
    x = torch.randn(*shape, generator=gen)
    got = student.simple_attention.context_vectors(x)
    expect_tensor(got, oracle(x)[2], what=f"context_vectors(x of shape {shape})",
                  hint="context = softmax(x @ x^T, dim=-1) @ x, for every query at once (not only one token)")


@pytest.mark.points(0.5)
def test_batched_context_equals_each_item_on_its_own(student, gen):
    x = torch.randn(B, T, D, generator=gen)
    batched = student.simple_attention.context_vectors(x)
    singles = [student.simple_attention.context_vectors(x[b]) for b in range(B)]
    for b, single in enumerate(singles):
        expect_tensor(single, oracle(x[b])[2], what=f"context_vectors(x[{b}])")
    expect_tensor(batched, torch.stack(singles), what="context_vectors(x) of a batch vs each item alone",
                  hint="batch items must not see each other: each gets its own (T, T) weight matrix")


@pytest.mark.points(0.5)
def test_permuting_tokens_permutes_the_context_vectors(student, gen):
    x = torch.randn(2, 6, 4, generator=gen)
    perm = torch.randperm(6, generator=gen)
    a = student.simple_attention.context_vectors(x)
    b = student.simple_attention.context_vectors(x[:, perm])
    expect_tensor(a, oracle(x)[2], what="context_vectors(x)")  # the property alone would pass a constant answer
    expect_tensor(b, a[:, perm], what="context_vectors(x[:, perm]) vs context_vectors(x)[:, perm]",
                  hint="without positions or masks, attention treats the tokens as a set: reordering them "
                       "only reorders the outputs")


@pytest.mark.points(0.5)
def test_float64_inputs_stay_float64(student, gen):
    x = torch.randn(B, T, D, generator=gen, dtype=torch.float64)
    scores, weights, context = oracle(x)
    expect_tensor(student.simple_attention.attention_scores(x), scores, what="attention_scores(float64 x)")
    expect_tensor(student.simple_attention.attention_weights(scores), weights, what="attention_weights(float64 scores)")
    expect_tensor(student.simple_attention.context_vectors(x), context, what="context_vectors(float64 x)",
                  hint="do not create float32 tensors (e.g. torch.zeros(...) without dtype) inside your functions")


@pytest.mark.severe(OVERFLOW)
@pytest.mark.points(0.5)
def test_large_scores_do_not_overflow(student, gen):
    scores = torch.randn(2, T, T, generator=gen) * 300  # exp(300) is inf in float32
    e = torch.exp(scores.double() - scores.double().amax(dim=-1, keepdim=True))
    weights = student.simple_attention.attention_weights
    got = expect_stable(lambda: weights(scores), lambda: weights(scores / 300), what="attention_weights(scores ~300)")
    expect_tensor(got, (e / e.sum(dim=-1, keepdim=True)).float(), what="attention_weights(scores of size ~300)")
    x = torch.randn(B, T, D, generator=gen) * 12  # dot products of ~400
    context = student.simple_attention.context_vectors
    got = expect_stable(lambda: context(x), lambda: context(x / 12), what="context_vectors(x * 12)")
    expect_tensor(got, oracle(x)[2], what="context_vectors(x * 12)", atol=1e-3, rtol=1e-3)


@pytest.mark.points(0.5)
def test_float64_gradients_match_the_oracle(student, gen):
    x = torch.randn(B, T, D, generator=gen, dtype=torch.float64)
    g = torch.randn(B, T, D, generator=gen, dtype=torch.float64)
    expect_grads(student.simple_attention.context_vectors, (x,), lambda t: oracle(t)[2], g,
                 what="context_vectors(float64 x) backward", names=("inputs",))
    scores = torch.randn(B, T, T, generator=gen, dtype=torch.float64) * 2
    gw = torch.randn(B, T, T, generator=gen, dtype=torch.float64)
    expect_grads(student.simple_attention.attention_weights, (scores,), _softmax64, gw,
                 what="attention_weights(float64 scores) backward", names=("scores",))


def _softmax64(s: torch.Tensor) -> torch.Tensor:
    e = torch.exp(s - s.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)
