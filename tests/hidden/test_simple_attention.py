"""Hidden tests for `simple_attention`: float64 oracles on 2-D and batched inputs, row sums, equivariance."""

from __future__ import annotations

import pytest
import torch

from grader.testing.catalogue.softmax import context_suspects, scores_suspects, weights_suspects
from grader.testing.checks import expect_call, expect_tensor, unless_refused
from grader.testing.gradients import expect_grads
from grader.testing.regimes import SHIFT, expect_stable, unshifted

pytestmark = pytest.mark.exercise("simple_attention")

OVERFLOW = "outputs become inf or NaN for inputs of ordinary size (a softmax without the max subtracted)"

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
    expect_call(lambda: student.simple_attention.attention_scores(x), oracle(x)[0],
                what=f"attention_scores(x of shape {shape})", suspects=scores_suspects(x))


@pytest.mark.points(1)
@pytest.mark.parametrize("shape", list(SHAPES.values()), ids=list(SHAPES))
def test_weights_match_float64_oracle_and_rows_sum_to_one(student, gen, shape):
    x = torch.randn(*shape, generator=gen)
    scores = oracle(x)[0]
    expect_call(lambda: student.simple_attention.attention_weights(scores), oracle(x)[1],
                what=f"attention_weights(scores of shape {tuple(scores.shape)})", suspects=weights_suspects(scores))


@pytest.mark.points(0.5)
def test_weights_of_four_dim_scores_normalise_the_last_dim(student, gen):
    scores = torch.randn(2, 2, T, T, generator=gen)  # (B, H, T, T), as in multi-head attention later
    # beyond the docstring's (T, T) or (B, T, T): a student's own check may refuse it, an answer must be right
    refused, got = unless_refused(lambda: student.simple_attention.attention_weights(scores))
    if refused:
        return
    e = torch.exp(scores.double() - scores.double().amax(dim=-1, keepdim=True))
    expect_call(lambda: got, (e / e.sum(dim=-1, keepdim=True)).float(),
                what="attention_weights(scores of shape (2, 2, 5, 5))", suspects=weights_suspects(scores))


@pytest.mark.points(0.75)
@pytest.mark.parametrize("shape", list(SHAPES.values()), ids=list(SHAPES))
def test_context_vectors_match_float64_oracle(student, gen, shape):
    x = torch.randn(*shape, generator=gen)
    expect_call(lambda: student.simple_attention.context_vectors(x), oracle(x)[2],
                what=f"context_vectors(x of shape {shape})", suspects=context_suspects(x) + scores_suspects(x))


@pytest.mark.points(0.5)
def test_batched_context_equals_each_item_on_its_own(student, gen):
    x = torch.randn(B, T, D, generator=gen)
    context = student.simple_attention.context_vectors
    for b in range(B):
        expect_call(lambda b=b: context(x[b]), oracle(x[b])[2], what=f"context_vectors(x[{b}])",
                    suspects=context_suspects(x[b]))
    expect_call(lambda: context(x), oracle(x)[2], what="context_vectors(x) of a batch (each item on its own)",
                suspects=context_suspects(x) + scores_suspects(x))
    for one, what in ((x[:1], "a batch of one (1, T, d)"), (x[:, :1], "one token per item (B, 1, d)")):
        expect_call(lambda one=one: context(one), oracle(one)[2], what=f"context_vectors(x) of {what}",
                    suspects=context_suspects(one) + scores_suspects(one))


@pytest.mark.points(0.5)
def test_permuting_tokens_permutes_the_context_vectors(student, gen):
    x = torch.randn(2, 6, 4, generator=gen)
    perm = torch.randperm(6, generator=gen)
    context = student.simple_attention.context_vectors
    a = expect_call(lambda: context(x), oracle(x)[2], what="context_vectors(x)",  # the property alone: a constant
                    suspects=context_suspects(x) + scores_suspects(x))
    expect_call(lambda: context(x[:, perm]), a[:, perm], what="context_vectors(x[:, perm]) vs context_vectors(x)[:, perm]")


@pytest.mark.points(0.5)
def test_float64_inputs_stay_float64(student, gen):
    x = torch.randn(B, T, D, generator=gen, dtype=torch.float64)
    scores, weights, context = oracle(x)
    sa = student.simple_attention
    expect_call(lambda: sa.attention_scores(x), scores, what="attention_scores(float64 x)", suspects=scores_suspects(x))
    expect_call(lambda: sa.attention_weights(scores), weights, what="attention_weights(float64 scores)",
                suspects=weights_suspects(scores))
    expect_call(lambda: sa.context_vectors(x), context, what="context_vectors(float64 x)", suspects=context_suspects(x))


@pytest.mark.severe(OVERFLOW)
@pytest.mark.points(0.5)
def test_large_scores_do_not_overflow(student, gen):
    # every score shifted by one constant (grader.testing.regimes): exp overflows float32 on every draw, and the
    # softmax stays as far from one-hot as for ordinary scores, so a wrong scale shows on every draw too (scores
    # scaled up, x * 12, saturated it: a 1/sqrt(d) scale passed on 4 draws of 12)
    base = torch.randn(2, T, T, generator=gen) * 2
    scores = base + SHIFT
    e = torch.exp(scores.double() - scores.double().amax(dim=-1, keepdim=True))
    weights = student.simple_attention.attention_weights
    got = expect_stable(lambda: weights(scores), lambda: weights(base), what="attention_weights(scores + 150)")
    expect_tensor(got, (e / e.sum(dim=-1, keepdim=True)).float(), what="attention_weights(scores + 150)",
                  suspects=weights_suspects(scores))
    x = torch.randn(B, T, D, generator=gen)
    x[..., -1] = SHIFT ** 0.5  # every dot product x_i . x_j gains 150
    context = student.simple_attention.context_vectors
    got = expect_stable(lambda: context(x), lambda: context(unshifted(x)),
                        what="context_vectors(x, last feature sqrt(150): every score + 150)")
    expect_tensor(got, oracle(x)[2], what="context_vectors(x, last feature sqrt(150): every score + 150)",
                  atol=1e-3, rtol=1e-3, suspects=context_suspects(x))


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
