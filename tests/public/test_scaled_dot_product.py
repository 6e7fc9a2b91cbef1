"""Public tests for `scaled_dot_product`: the course's worked example, shapes, masks, the scale argument, dropout
at eval and in training, large scores and gradients, heads that are transposed views."""

from __future__ import annotations

import pytest
import torch

from grader.testing.attention import sdpa_float64
from grader.testing.catalogue.sdp import sdp_suspects
from grader.testing.checks import expect_shape, expect_tensor, expect_tuple
from grader.testing.diagnosis import Suspects
from grader.testing.dropout import attention_with_draw, drawn_multipliers
from grader.testing.gradients import expect_grads, expect_grads_of
from grader.testing.layouts import transposed
from grader.testing.oracles import expect_dropout_on_weights, expect_repeatable, returned_before_dropout

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


def sdpa(student, *args, suspects: Suspects | None = None, **kwargs):
    return expect_tuple(lambda: student.scaled_dot_product.scaled_dot_product_attention(*args, **kwargs), 2,
                        what="scaled_dot_product_attention(...) (output, weights)", suspects=suspects)


def weights64(q, k, mask=None, scale=None):
    """softmax(q k^T * scale + mask) in float64 (no fully-masked rows), cast back."""
    out = sdpa_float64(q.double(), k.double(), torch.eye(k.shape[-2], dtype=torch.float64).expand(
        *k.shape[:-2], -1, -1), mask, scale)
    return out.to(q.dtype)


@pytest.mark.points(2)
def test_reproduces_the_seed_example(student):
    q, k, v = seed_qkv()
    on_w = sdp_suspects(q, k, v, part=1)
    out, weights = sdpa(student, q, k, v, suspects=on_w)
    expect_tensor(weights, SEED_WEIGHTS, what="weights for the seed's Q, K (E = 4)", atol=1e-4, rtol=1e-3,
                  suspects=on_w)
    expect_tensor(out, SEED_OUTPUT, what="output for the seed's Q, K, V", atol=1e-4, rtol=1e-3,
                  suspects=sdp_suspects(q, k, v))


@pytest.mark.points(1)
def test_shapes_with_batch_dims_L_not_S_and_Ev_not_E(student, gen):
    q = torch.randn(2, 3, 4, 8, generator=gen)
    k = torch.randn(2, 3, 6, 8, generator=gen)
    v = torch.randn(2, 3, 6, 5, generator=gen)
    on_w = sdp_suspects(q, k, v, part=1)
    out, weights = sdpa(student, q, k, v, suspects=on_w)
    expect_tensor(weights, weights64(q, k), what="weights for query (2, 3, L=4, E=8), key (2, 3, S=6, E=8)",
                  suspects=on_w)
    expect_shape(out, (2, 3, 4, 5), what="output for value (2, 3, S=6, Ev=5)")
    expect_tensor(out, sdpa_float64(q, k, v), what="output vs F.scaled_dot_product_attention",
                  suspects=sdp_suspects(q, k, v))


@pytest.mark.points(1)
def test_bool_causal_mask_matches_sdpa(student, gen):
    q, k, v = (torch.randn(2, 5, 4, generator=gen) for _ in range(3))
    causal = torch.ones(5, 5, dtype=torch.bool).tril()  # True = may attend: the past and itself
    on_w = sdp_suspects(q, k, v, mask=causal, part=1)
    out, weights = sdpa(student, q, k, v, mask=causal, suspects=on_w)
    expect_tensor(weights, weights64(q, k, causal), what="weights with a causal bool mask", suspects=on_w)
    expect_tensor(out, sdpa_float64(q, k, v, causal), what="output with a causal bool mask vs SDPA",
                  suspects=sdp_suspects(q, k, v, mask=causal))
    q, k, v = (torch.randn(3, 4, 5, 4, generator=gen) for _ in range(3))  # (B, H, T, E)
    pad = torch.tensor([[True] * 5, [True] * 2 + [False] * 3, [True] * 4 + [False]])[:, None, None, :]  # (B, 1, 1, S)
    on_w = sdp_suspects(q, k, v, mask=pad, part=1)
    _, weights = sdpa(student, q, k, v, mask=pad, suspects=on_w)
    expect_tensor(weights, weights64(q, k, pad), what="weights with a (B=3, 1, 1, S) padding mask", suspects=on_w)


@pytest.mark.points(0.5)
def test_heads_split_by_view_and_transpose(student, gen):
    """Heads as multi-head attention hands them over: x.view(B, L, H, E).transpose(1, 2), which is not contiguous
    (a .view inside attention fails on it; .reshape or matmul on the last two dims does not)."""
    q, k, v = (torch.randn(2, 3, n, 4, generator=gen) for n in (5, 6, 6))  # (B, H, L, E): sent as (B, L, H, E).T
    on_out = sdp_suspects(q, k, v)
    out, _ = sdpa(student, transposed(q, 1, 2), transposed(k, 1, 2), transposed(v, 1, 2), suspects=on_out)
    expect_tensor(out, sdpa_float64(q, k, v), what="output for (B, H, L, E) heads made by .view(B, L, H, E)"
                  ".transpose(1, 2)", suspects=on_out)


@pytest.mark.points(1.5)
def test_additive_mask_is_added_to_the_scaled_scores(student, gen):
    q, k, v = (torch.randn(1, 4, 8, generator=gen) for _ in range(3))
    pos = torch.arange(4)
    bias = -0.5 * (pos[:, None] - pos[None, :]).abs().float()  # (4, 4), finite: ALiBi-like distance penalty
    bias[0, 3] = float("-inf")  # and one blocked key
    on_out = sdp_suspects(q, k, v, mask=bias)
    out, _ = sdpa(student, q, k, v, mask=bias, suspects=on_out)
    expect_tensor(out, sdpa_float64(q, k, v, bias), what="output with an additive (float) mask vs SDPA",
                  suspects=on_out)


@pytest.mark.points(1)
def test_fully_masked_query_gets_zero_weights_and_zero_output(student, gen):
    q, k, v = torch.randn(3, 4, generator=gen), torch.randn(5, 4, generator=gen), torch.randn(5, 2, generator=gen)
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[1] = False  # query 1 may attend to no key at all
    on_w = sdp_suspects(q, k, v, mask=mask, part=1)
    out, weights = sdpa(student, q, k, v, mask=mask, suspects=on_w)
    want = weights64(q, k, mask)
    want[1] = 0.0
    expect_tensor(weights, want, what="weights with query 1 fully masked (its row all zeros, as SDPA)", suspects=on_w)
    expect_tensor(out, want @ v, what="output with query 1 fully masked", suspects=sdp_suspects(q, k, v, mask=mask))


@pytest.mark.points(1)
def test_an_explicit_scale_is_used(student, gen):
    q, k, v = torch.randn(2, 4, 6, generator=gen), torch.randn(2, 5, 6, generator=gen), torch.randn(2, 5, 3, generator=gen)
    for scale in (0.7, 0.0):  # 0.0 is a scale too: every key gets the same weight
        on_w = sdp_suspects(q, k, v, scale=scale, part=1)
        _, weights = sdpa(student, q, k, v, scale=scale, suspects=on_w)
        expect_tensor(weights, weights64(q, k, scale=scale), what=f"weights with scale={scale}", suspects=on_w)


@pytest.mark.points(1)
def test_no_dropout_when_not_training(student, gen):
    q, k, v = (torch.randn(2, 6, 4, generator=gen) for _ in range(3))
    on_out = sdp_suspects(q, k, v)
    out, _ = sdpa(student, q, k, v, dropout_p=0.5, training=False, suspects=on_out)
    again, _ = sdpa(student, q, k, v, dropout_p=0.5)  # training defaults to False
    expect_repeatable(out, again, what="output of two calls with dropout_p=0.5 and training=False (or its default)")
    expect_tensor(out, sdpa_float64(q, k, v), what="output with dropout_p=0.5, training=False", suspects=on_out)


@pytest.mark.points(1)
def test_dropout_in_training_drops_weights_and_rescales_the_rest(student, gen):
    q, k, v = torch.randn(2, 24, 8, generator=gen), torch.randn(2, 24, 8, generator=gen), \
        torch.randn(2, 24, 4, generator=gen)
    p = 0.2  # not 0.5: there 1/p == 1/(1-p) and keeping with p looks like dropping with p
    _, w_eval = sdpa(student, q, k, v, dropout_p=p, training=False)
    out, w = sdpa(student, q, k, v, dropout_p=p, training=True)
    expect_tensor(out, w @ v, what="output in training mode vs the returned weights @ value",
                  suspects=returned_before_dropout(w_eval, w, p))
    expect_dropout_on_weights(w, weights64(q, k), torch.eye(24), p, what="weights returned in training mode",
                              tol=1e-5)


@pytest.mark.points(1)
def test_large_scores_and_gradients(student, gen):
    q, k, v = (torch.randn(2, 5, 4, generator=gen, dtype=torch.float64) for _ in range(3))
    big = q * 0 + torch.tensor([30.0, 0.0, 0.0, 0.0], dtype=torch.float64)  # every score 900 / 2 = 450
    keys = k.clone()
    keys[..., 0] = 30.0
    on_out = sdp_suspects(big.float(), keys.float(), v.float())
    out, _ = sdpa(student, big.float(), keys.float(), v.float(), suspects=on_out)
    expect_tensor(out, sdpa_float64(big.float(), keys.float(), v.float()), what="output for scores of about 450",
                  atol=1e-4, rtol=1e-4, suspects=on_out)
    g = torch.linspace(-1.0, 1.0, 40, dtype=torch.float64).reshape(2, 5, 4)

    def oracle(q, k, v):
        weights = torch.softmax(q @ k.transpose(-2, -1) / 2.0, dim=-1)
        return weights @ v, weights

    expect_grads(student.scaled_dot_product.scaled_dot_product_attention, (q, k, v), oracle, (g, None),
                 what="scaled_dot_product_attention(float64) backward", names=("query", "key", "value"))


@pytest.mark.points(1)
def test_training_mode_backward_goes_through_the_dropout(student, gen):
    """A forward and backward in training mode (dropout_p=0.2): the gradients must be those of float64 attention
    with the very weights your dropout kept (your returned weights say which)."""
    q, k, v = (torch.randn(2, 10, 6, generator=gen, dtype=torch.float64) for _ in range(3))
    g_out, g_w = torch.randn(2, 10, 6, generator=gen, dtype=torch.float64), \
        torch.randn(2, 10, 10, generator=gen, dtype=torch.float64)
    got = student.scaled_dot_product.scaled_dot_product_attention.grads(q, k, v, grad_output=(g_out, g_w),
                                                                        dropout_p=0.2, training=True)
    weights = weights64(q, k)
    expect_dropout_on_weights(got[0][1], weights, torch.eye(10, dtype=torch.float64), 0.2,
                              what="weights returned in training mode (dropout_p=0.2)")
    expect_grads_of(got, (q, k, v), attention_with_draw(drawn_multipliers(got[0][1], weights, 0.2)), (g_out, g_w),
                    names=("query", "key", "value"), what="scaled_dot_product_attention(float64, dropout_p=0.2, "
                    "training=True) backward")
