"""Public tests for `simple_attention`: the book's 6-token example (seed 001) and batched inputs."""

from __future__ import annotations

import pytest
import torch

from grader.testing.checks import expect_tensor

pytestmark = pytest.mark.exercise("simple_attention")

# Seed 001 ("Your journey starts with one step"): six tokens embedded in 3 dimensions.
INPUTS = torch.tensor([
    [0.43, 0.15, 0.89],  # Your     (x^1)
    [0.55, 0.87, 0.66],  # journey  (x^2)
    [0.57, 0.85, 0.64],  # starts   (x^3)
    [0.22, 0.58, 0.33],  # with     (x^4)
    [0.77, 0.25, 0.10],  # one      (x^5)
    [0.05, 0.80, 0.55],  # step     (x^6)
])
# The seed's printed attn_scores, attn_weights and context_vecs (4 decimals).
SCORES = torch.tensor([
    [0.9995, 0.9544, 0.9422, 0.4753, 0.4576, 0.6310],
    [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865],
    [0.9422, 1.4754, 1.4570, 0.8296, 0.7154, 1.0605],
    [0.4753, 0.8434, 0.8296, 0.4937, 0.3474, 0.6565],
    [0.4576, 0.7070, 0.7154, 0.3474, 0.6654, 0.2935],
    [0.6310, 1.0865, 1.0605, 0.6565, 0.2935, 0.9450],
])
WEIGHTS = torch.tensor([
    [0.2098, 0.2006, 0.1981, 0.1242, 0.1220, 0.1452],
    [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581],
    [0.1390, 0.2369, 0.2326, 0.1242, 0.1108, 0.1565],
    [0.1435, 0.2074, 0.2046, 0.1462, 0.1263, 0.1720],
    [0.1526, 0.1958, 0.1975, 0.1367, 0.1879, 0.1295],
    [0.1385, 0.2184, 0.2128, 0.1420, 0.0988, 0.1896],
])
CONTEXT = torch.tensor([
    [0.4421, 0.5931, 0.5790],
    [0.4419, 0.6515, 0.5683],
    [0.4431, 0.6496, 0.5671],
    [0.4304, 0.6298, 0.5510],
    [0.4671, 0.5910, 0.5266],
    [0.4177, 0.6503, 0.5645],
])


@pytest.mark.points(2)
def test_scores_match_the_books_attn_scores(student):
    got = student.simple_attention.attention_scores(INPUTS)
    expect_tensor(got, SCORES, what="attention_scores(inputs)", atol=1e-4, rtol=0,
                  hint="scores[i, j] is the dot product of token i with token j: inputs @ inputs^T")


@pytest.mark.points(2)
def test_weights_match_the_books_attn_weights(student):
    got = student.simple_attention.attention_weights(SCORES)
    expect_tensor(got, WEIGHTS, what="attention_weights(attn_scores)", atol=1e-4, rtol=0,
                  hint="softmax over the last dimension (the keys), so that every row sums to 1; "
                       "dividing by the plain sum is not softmax")


@pytest.mark.points(2)
def test_context_vectors_match_the_books_context_vecs(student):
    got = student.simple_attention.context_vectors(INPUTS)
    expect_tensor(got, CONTEXT, what="context_vectors(inputs)", atol=1e-4, rtol=0,
                  hint="multiply the attention WEIGHTS (not the scores) by the inputs: weights @ inputs")


@pytest.mark.points(2)
def test_a_batch_of_two_gives_one_result_per_item(student):
    batch = torch.stack([INPUTS, INPUTS.flip(0)])  # (2, 6, 3): the sentence and its reverse
    scores = student.simple_attention.attention_scores(batch)
    expect_tensor(scores, torch.stack([SCORES, SCORES.flip(0, 1)]), what="attention_scores(batch of shape (2, 6, 3))",
                  atol=1e-4, rtol=0,
                  hint="on a 3-D tensor `.T` reverses all dimensions; transpose only the last two: x.transpose(-2, -1)")
    context = student.simple_attention.context_vectors(batch)
    expect_tensor(context, torch.stack([CONTEXT, CONTEXT.flip(0)]), what="context_vectors(batch of shape (2, 6, 3))",
                  atol=1e-4, rtol=0, hint="take the softmax over dim=-1 so that it works for 2-D and 3-D scores")
