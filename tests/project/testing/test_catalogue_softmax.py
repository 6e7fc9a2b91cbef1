"""Simple attention's catalogue (:mod:`grader.testing.catalogue.softmax`): scores scaled where the exercise asks
for plain dot products, and transposes of the wrong dims. Each diagnosis is named on a bug written here as a
learner writes it and never on the reference (the seed's inputs, and a batch)."""

from __future__ import annotations

import math

import pytest
import torch

from grader.testing.catalogue.softmax import context_suspects, scores_suspects
from tests.project.testing.test_catalogue_modules import ids, named, raised, solution

SEED_INPUTS = torch.tensor(  # seed 001's six tokens
    [
        [0.43, 0.15, 0.89],
        [0.55, 0.87, 0.66],
        [0.57, 0.85, 0.64],
        [0.22, 0.58, 0.33],
        [0.77, 0.25, 0.10],
        [0.05, 0.80, 0.55],
    ]
)
BATCH = torch.randn(3, 5, 4, generator=torch.Generator().manual_seed(9))  # B != T != d


def scaled_scores(x: torch.Tensor) -> torch.Tensor:
    return x @ x.transpose(-2, -1) / math.sqrt(x.shape[-1])  # scaled dot-product habits


def scaled_context(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x @ x.transpose(-2, -1) / x.shape[-1], dim=-1) @ x


def features_gram(x: torch.Tensor) -> torch.Tensor:
    return x.transpose(-2, -1) @ x  # the transpose on the wrong operand: (d, d)


@pytest.mark.parametrize("x", [SEED_INPUTS, BATCH], ids=["2-D", "3-D"])
def test_scaled_scores_are_named_and_the_reference_is_not(x):
    want = solution("simple_attention").attention_scores(x)
    assert named(scores_suspects(x), scaled_scores(x), want) == {"wrong-scale"}
    assert named(scores_suspects(x), features_gram(x), want) == {"keys-dot-t"}
    assert named(scores_suspects(x), want.clone(), want) == set()


@pytest.mark.parametrize("x", [SEED_INPUTS, BATCH], ids=["2-D", "3-D"])
def test_scaled_context_is_named_and_the_reference_is_not(x):
    want = solution("simple_attention").context_vectors(x)
    suspects = context_suspects(x) + scores_suspects(x)
    assert named(suspects, scaled_context(x), want) == {"wrong-scale"}
    assert named(suspects, want.clone(), want) == set()


def test_a_transpose_of_the_batch_and_the_tokens_is_named_by_its_error():
    error = raised(lambda: BATCH @ BATCH.transpose(0, 1))
    assert ids(scores_suspects(BATCH).explain_error(error)) == {"keys-dot-t"}
    assert scores_suspects(BATCH).explain_error(raised(lambda: BATCH @ BATCH[:2])) is None
