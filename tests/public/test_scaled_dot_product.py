"""Public tests for `scaled_dot_product`: the course's worked example, shapes, masks, and dropout at eval."""

from __future__ import annotations

import pytest
import torch

from grader.testing.attention import sdpa_float64
from grader.testing.checks import expect, expect_finite, expect_shape, expect_tensor

pytestmark = pytest.mark.exercise("scaled_dot_product")

# Seed 003 ("Once upon a time there"): 5 tokens embedded in 4 dims, W_Q/W_K/W_V from torch.rand.
SEED_WEIGHTS = torch.tensor([[1.6344e-01, 5.0283e-02, 1.9885e-01, 3.4910e-01, 2.3833e-01],
                             [4.4966e-05, 9.9994e-01, 1.0389e-05, 1.0494e-07, 1.5519e-06],
                             [1.2761e-01, 2.1395e-02, 1.9418e-01, 4.6106e-01, 1.9576e-01],
                             [2.5676e-03, 4.0538e-07, 1.5426e-02, 9.5713e-01, 2.4878e-02],
                             [4.6963e-02, 4.9191e-04, 7.5844e-02, 5.9361e-01, 2.8309e-01]])
SEED_OUTPUT = torch.tensor([[-1.0221, -1.1318, -1.0966, -1.2475],
                            [1.6613, 1.7716, 2.1347, 2.5049],
                            [-1.3064, -1.3985, -1.3982, -1.5418],
                            [-2.2928, -2.2490, -2.4211, -2.5138],
                            [-1.6010, -1.6693, -1.7563, -1.9028]])


def seed_qkv() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The seed's Q, K, V, rebuilt exactly as the tutorial builds them."""
    torch.manual_seed(123)
    embedding = torch.nn.Embedding(5, 4)
    x = embedding(torch.arange(5)).detach()  # (5, 4)
    torch.manual_seed(123)
    w_q, w_k, w_v = torch.rand(4, 4), torch.rand(4, 4), torch.rand(4, 4)
    return x @ w_q, x @ w_k, x @ w_v


@pytest.mark.points(3)
def test_reproduces_the_seed_example(student):
    q, k, v = seed_qkv()
    got = student.scaled_dot_product.scaled_dot_product_attention(q, k, v)
    expect(isinstance(got, tuple) and len(got) == 2, f"got {type(got).__name__}, expected a tuple (output, weights)",
           "return output, weights")
    out, weights = got
    expect_tensor(weights, SEED_WEIGHTS, what="weights for the seed's Q, K (E = 4)", atol=1e-4, rtol=1e-3,
                  hint="softmax(Q @ K^T / sqrt(E)) over the last dim (the keys); E = 4 here, so divide by 2")
    expect_tensor(out, SEED_OUTPUT, what="output for the seed's Q, K, V", atol=1e-4, rtol=1e-3,
                  hint="output = weights @ V")


@pytest.mark.points(2)
def test_shapes_with_batch_dims_L_not_S_and_Ev_not_E(student, gen):
    q = torch.randn(2, 3, 4, 8, generator=gen)
    k = torch.randn(2, 3, 6, 8, generator=gen)
    v = torch.randn(2, 3, 6, 5, generator=gen)
    out, weights = student.scaled_dot_product.scaled_dot_product_attention(q, k, v)
    expect_shape(weights, (2, 3, 4, 6), what="weights for query (2, 3, L=4, E=8), key (2, 3, S=6, E=8)",
                 hint="weights are (..., L, S): one row per query, one column per key")
    expect_shape(out, (2, 3, 4, 5), what="output for value (2, 3, S=6, Ev=5)", hint="output is (..., L, Ev)")
    expect_tensor(out, sdpa_float64(q, k, v), what="output vs F.scaled_dot_product_attention",
                  hint="transpose only the last two dims of key: key.transpose(-2, -1); scale by 1/sqrt(E)")
    sums = weights.double().sum(dim=-1)
    expect_tensor(sums, torch.ones_like(sums), what="weights.sum(dim=-1)", atol=1e-5, rtol=0,
                  hint="softmax over the keys (dim=-1): each query's weights must sum to 1")


@pytest.mark.points(2)
def test_bool_causal_mask_matches_sdpa(student, gen):
    q, k, v = (torch.randn(2, 5, 4, generator=gen) for _ in range(3))
    causal = torch.ones(5, 5, dtype=torch.bool).tril()  # True = may attend: the past and itself
    out, weights = student.scaled_dot_product.scaled_dot_product_attention(q, k, v, mask=causal)
    expect_finite(out, what="output with a causal bool mask")
    future = weights.masked_select(~causal.expand(2, 5, 5))
    expect(bool((future == 0).all()), "a query gives non-zero weight to a key where the bool mask is False",
           "bool masks follow SDPA: True = may attend; fill the False positions with -inf before softmax")
    expect_tensor(out, sdpa_float64(q, k, v, causal), what="output with a causal bool mask vs SDPA")


@pytest.mark.points(2)
def test_additive_mask_is_added_to_the_scaled_scores(student, gen):
    q, k, v = (torch.randn(1, 4, 8, generator=gen) for _ in range(3))
    pos = torch.arange(4)
    bias = -0.5 * (pos[:, None] - pos[None, :]).abs().float()  # (4, 4), finite: ALiBi-like distance penalty
    out, _ = student.scaled_dot_product.scaled_dot_product_attention(q, k, v, mask=bias)
    expect_tensor(out, sdpa_float64(q, k, v, bias), what="output with an additive (float) mask vs SDPA",
                  hint="a float mask is ADDED to the scores after scaling: softmax(Q K^T * scale + mask); "
                       "it is not a 0/1 keep-mask")


@pytest.mark.points(1.5)
def test_fully_masked_query_gets_zero_weights_and_zero_output(student, gen):
    q, k, v = torch.randn(3, 4, generator=gen), torch.randn(5, 4, generator=gen), torch.randn(5, 2, generator=gen)
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[1] = False  # query 1 may attend to no key at all
    out, weights = student.scaled_dot_product.scaled_dot_product_attention(q, k, v, mask=mask)
    expect_finite(weights, what="weights with a fully-masked query row",
                  hint="softmax of a row that is all -inf is NaN: detect such rows and give them zero weights")
    expect_tensor(weights[1], torch.zeros(5), what="weights of the fully-masked query 1",
                  hint="SDPA gives a query with no visible key all-zero weights (not a uniform row: no -1e9 fill)")
    expect_tensor(out[1], torch.zeros(2), what="output of the fully-masked query 1")
    expect_tensor(out, sdpa_float64(q, k, v, mask), what="output vs SDPA")


@pytest.mark.points(1.5)
def test_no_dropout_when_not_training(student, gen):
    q, k, v = (torch.randn(2, 6, 4, generator=gen) for _ in range(3))
    out, _ = student.scaled_dot_product.scaled_dot_product_attention(q, k, v, dropout_p=0.5, training=False)
    expect_tensor(out, sdpa_float64(q, k, v), what="output with dropout_p=0.5, training=False",
                  hint="dropout acts only when training=True; at evaluation the weights are used as they are")
