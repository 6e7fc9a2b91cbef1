"""Public tests for `simple_attention`: the book's 6-token example (seed 001) and batched inputs."""

from __future__ import annotations

import pytest
import torch

from grader.testing.catalogue.softmax import context_suspects, scores_suspects, softmax_suspects
from grader.testing.checks import expect_call
from grader.testing.gradients import expect_grads

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
    expect_call(lambda: student.simple_attention.attention_scores(INPUTS), SCORES, what="attention_scores(inputs)",
                atol=1e-4, rtol=0, suspects=scores_suspects(INPUTS))


@pytest.mark.points(2)
def test_weights_match_the_books_attn_weights(student):
    weights = student.simple_attention.attention_weights
    expect_call(lambda: weights(SCORES), WEIGHTS, what="attention_weights(attn_scores)", atol=1e-4, rtol=0,
                suspects=softmax_suspects(SCORES))
    large = torch.tensor([[1000.0, 999.0, -1000.0]])  # scores this large overflow exp(x) in float32
    expect_call(lambda: weights(large), torch.tensor([[0.7310586, 0.2689414, 0.0]]),
                what="attention_weights([[1000, 999, -1000]])", suspects=softmax_suspects(large))


@pytest.mark.points(1.5)
def test_context_vectors_match_the_books_context_vecs(student):
    expect_call(lambda: student.simple_attention.context_vectors(INPUTS), CONTEXT, what="context_vectors(inputs)",
                atol=1e-4, rtol=0, suspects=context_suspects(INPUTS))


@pytest.mark.points(1.5)
def test_a_batch_of_two_gives_one_result_per_item(student):
    batch = torch.stack([INPUTS, INPUTS.flip(0)])  # (2, 6, 3): the sentence and its reverse
    sa = student.simple_attention
    expect_call(lambda: sa.attention_scores(batch), torch.stack([SCORES, SCORES.flip(0, 1)]),
                what="attention_scores(batch of shape (2, 6, 3))", atol=1e-4, rtol=0, suspects=scores_suspects(batch))
    expect_call(lambda: sa.attention_weights(batch @ batch.transpose(1, 2)), torch.stack([WEIGHTS, WEIGHTS.flip(0, 1)]),
                what="attention_weights(scores of shape (2, 6, 6))", atol=1e-4, rtol=0,
                suspects=softmax_suspects(batch @ batch.transpose(1, 2)))
    expect_call(lambda: sa.context_vectors(batch), torch.stack([CONTEXT, CONTEXT.flip(0)]),
                what="context_vectors(batch of shape (2, 6, 3))", atol=1e-4, rtol=0,
                suspects=context_suspects(batch) + scores_suspects(batch))


@pytest.mark.points(1)
def test_gradients_flow_back_to_the_inputs(student):
    x = torch.stack([INPUTS, INPUTS.flip(0)]).double()
    g = torch.linspace(-1.0, 1.0, 36, dtype=torch.float64).reshape(2, 6, 3)

    def oracle(t: torch.Tensor) -> torch.Tensor:
        return torch.softmax(t @ t.transpose(-2, -1), dim=-1) @ t

    expect_grads(student.simple_attention.context_vectors, (x,), oracle, g, what="context_vectors(float64 batch) "
                 "backward", names=("inputs",), suspects=context_suspects(x))
