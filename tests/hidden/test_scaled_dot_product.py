"""Hidden tests for `scaled_dot_product`: SDPA (math) and float64 oracles, masks, scale, fp16, dropout."""

from __future__ import annotations

import math

import pytest
import torch

from grader.testing.attention import sdpa_float64
from grader.testing.catalogue.sdp import sdp_suspects
from grader.testing.checks import expect, expect_shape, expect_tensor, expect_tuple
from grader.testing.diagnosis import Suspects
from grader.testing.dropout import attention_with_draw, drawn_multipliers, expect_new_draw
from grader.testing.gradients import expect_grads, expect_grads_of
from grader.testing.layouts import shared, sliced, transposed
from grader.testing.oracles import expect_dropout_on_weights, expect_repeatable, returned_before_dropout
from grader.testing.regimes import expect_stable, shifted_qk

pytestmark = pytest.mark.exercise("scaled_dot_product")

OVERFLOW = "outputs become inf or NaN for inputs of ordinary size (a softmax without the max subtracted)"


def oracle_weights(q, k, mask=None, scale=None) -> torch.Tensor:
    """float64 hand computation of the attention weights (fully-masked rows are zero)."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q.double() @ k.double().transpose(-2, -1) * scale
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask.double()
    dead = torch.isneginf(s).all(dim=-1, keepdim=True)
    w = torch.softmax(s.masked_fill(dead, 0.0), dim=-1).masked_fill(dead, 0.0)
    return w.to(q.dtype)


def sdpa(student, *args, suspects: Suspects | None = None, **kwargs):
    """The student's (output, weights); an exception it raises is explained by ``suspects`` if a variant raises it."""
    return expect_tuple(lambda: student.scaled_dot_product.scaled_dot_product_attention(*args, **kwargs), 2,
                        what="scaled_dot_product_attention(...) (output, weights)", suspects=suspects)


def both(q, k, v, mask=None, scale=None):
    """The suspects of the output and of the weights, for these inputs."""
    return sdp_suspects(q, k, v, mask=mask, scale=scale), sdp_suspects(q, k, v, mask=mask, scale=scale, part=1)


SHAPES = {  # name: (query, key, value) shapes
    "3-D, L = S": ((2, 5, 8), (2, 5, 8), (2, 5, 8)),
    "4-D heads, L != S": ((2, 3, 4, 6), (2, 3, 7, 6), (2, 3, 7, 6)),
    "4-D, Ev != E": ((3, 2, 5, 4), (3, 2, 6, 4), (3, 2, 6, 9)),
}


@pytest.mark.points(0.25)
@pytest.mark.parametrize("case", list(SHAPES))
def test_output_matches_sdpa_without_mask(student, gen, case):
    q, k, v = (torch.randn(*s, generator=gen) for s in SHAPES[case])
    on_out, _ = both(q, k, v)
    out, _ = sdpa(student, q, k, v, suspects=on_out)
    expect_tensor(out, sdpa_float64(q, k, v), what=f"output ({case})", suspects=on_out)


@pytest.mark.points(1)
def test_weights_match_float64_hand_computation(student, gen):
    q, k, v = torch.randn(2, 3, 5, 8, generator=gen), torch.randn(2, 3, 6, 8, generator=gen), \
        torch.randn(2, 3, 6, 4, generator=gen)
    _, on_w = both(q, k, v)
    _, weights = sdpa(student, q, k, v, suspects=on_w)
    expect_tensor(weights, oracle_weights(q, k), what="weights (2, 3, L=5, S=6), E = 8", suspects=on_w)


@pytest.mark.points(1)
def test_random_bool_mask_matches_sdpa(student, gen):
    q, k, v = (torch.randn(2, 2, 6, 4, generator=gen) for _ in range(3))
    mask = torch.rand(2, 2, 6, 6, generator=gen) < 0.6
    mask[..., 0] = True  # every query keeps at least one key
    on_out, on_w = both(q, k, v, mask)
    out, weights = sdpa(student, q, k, v, mask=mask, suspects=on_w)
    expect_tensor(weights, oracle_weights(q, k, mask), what="weights with a random bool mask", suspects=on_w)
    expect_tensor(out, sdpa_float64(q, k, v, mask), what="output with a random bool mask vs SDPA", suspects=on_out)


@pytest.mark.points(0.5)
def test_bool_mask_broadcasts_over_batch_dims(student, gen):
    q, k, v = torch.randn(2, 3, 4, 4, generator=gen), torch.randn(2, 3, 5, 4, generator=gen), \
        torch.randn(2, 3, 5, 4, generator=gen)
    mask = torch.ones(4, 5, dtype=torch.bool).tril(diagonal=1)  # (L, S), shared by every batch and head
    on_out, _ = both(q, k, v, mask)
    out, _ = sdpa(student, q, k, v, mask=mask, suspects=on_out)
    expect_tensor(out, sdpa_float64(q, k, v, mask), what="output with an (L, S) bool mask on (2, 3, L, S) scores",
                  suspects=on_out)
    q, k, v = torch.randn(3, 2, 4, 4, generator=gen), torch.randn(3, 2, 5, 4, generator=gen), \
        torch.randn(3, 2, 5, 4, generator=gen)
    pad = torch.tensor([[True] * 5, [True] * 2 + [False] * 3, [True] * 4 + [False]])[:, None, None, :]
    on_out, on_w = both(q, k, v, pad)
    out, weights = sdpa(student, q, k, v, mask=pad, suspects=on_w)  # (B, 1, 1, S), B = 3: a mask per batch item
    expect_tensor(weights, oracle_weights(q, k, pad), what="weights with a (B=3, 1, 1, S) padding mask", suspects=on_w)
    expect_tensor(out, sdpa_float64(q, k, v, pad), what="output with a (B=3, 1, 1, S) padding mask vs SDPA",
                  suspects=on_out)


@pytest.mark.points(1)
def test_additive_alibi_bias_is_added_after_scaling(student, gen):
    q, k, v = (torch.randn(2, 6, 8, generator=gen) * 2 for _ in range(3))
    pos = torch.arange(6)
    bias = -0.3 * (pos[:, None] - pos[None, :]).abs().float()  # (L, S): finite, non-zero off the diagonal
    on_out, on_w = both(q, k, v, bias)
    out, weights = sdpa(student, q, k, v, mask=bias, suspects=on_w)
    expect_tensor(weights, oracle_weights(q, k, bias), what="weights with an additive bias -0.3*|i-j|", suspects=on_w)
    expect_tensor(out, sdpa_float64(q, k, v, bias), what="output with an additive bias vs SDPA", suspects=on_out)


@pytest.mark.points(0.5)
def test_additive_causal_mask_blocks_the_future(student, gen):
    q, k, v = (torch.randn(2, 5, 4, generator=gen) for _ in range(3))
    additive = torch.full((5, 5), float("-inf")).triu(diagonal=1)  # 0 on and below the diagonal, -inf above
    on_out, on_w = both(q, k, v, additive)
    out, weights = sdpa(student, q, k, v, mask=additive, suspects=on_w)
    expect_tensor(weights, oracle_weights(q, k, additive), what="weights with an additive 0/-inf causal mask",
                  suspects=on_w)
    expect_tensor(out, sdpa_float64(q, k, v, additive), what="output with an additive causal mask vs SDPA",
                  suspects=on_out)


@pytest.mark.points(0.5)
def test_future_keys_do_not_change_earlier_outputs(student, gen):
    q, k, v = (torch.randn(1, 7, 4, generator=gen) for _ in range(3))
    causal = torch.ones(7, 7, dtype=torch.bool).tril()
    on_out, _ = both(q, k, v, causal)
    out, _ = sdpa(student, q, k, v, mask=causal, suspects=on_out)
    expect_tensor(out, sdpa_float64(q, k, v, causal), what="output with a (7, 7) causal bool mask vs SDPA",
                  suspects=on_out)
    k2, v2 = k.clone(), v.clone()
    k2[:, 4:] += 10.0 * torch.randn(1, 3, 4, generator=gen)
    v2[:, 4:] += 10.0
    out2, _ = sdpa(student, q, k2, v2, mask=causal)
    expect_tensor(out2[:, :4], out[:, :4], what="outputs of queries 0..3 after changing keys/values 4..6")


@pytest.mark.points(0.75)
def test_explicit_scale_is_used(student, gen):
    q, k, v = torch.randn(2, 4, 6, generator=gen), torch.randn(2, 5, 6, generator=gen), \
        torch.randn(2, 5, 3, generator=gen)
    for scale in (0.7, 0.0):  # 0.0: a real scale, every key gets the same weight
        on_out, on_w = both(q, k, v, scale=scale)
        out, weights = sdpa(student, q, k, v, scale=scale, suspects=on_w)
        expect_tensor(weights, oracle_weights(q, k, scale=scale), what=f"weights with scale={scale}", suspects=on_w)
        expect_tensor(out, sdpa_float64(q, k, v, scale=scale), what=f"output with scale={scale} vs SDPA",
                      suspects=on_out)


@pytest.mark.points(0.75)
def test_fully_masked_rows_give_zero_and_no_nan(student, gen):
    q, k, v = torch.randn(2, 4, 4, generator=gen), torch.randn(2, 5, 4, generator=gen), \
        torch.randn(2, 5, 3, generator=gen)
    mask = torch.rand(2, 4, 5, generator=gen) < 0.7
    mask[..., 0] = True
    mask[0, 2] = False  # batch 0, query 2: no key at all
    mask[1, 0] = False
    on_out, on_w = both(q, k, v, mask)
    out, weights = sdpa(student, q, k, v, mask=mask, suspects=on_w)
    expect_tensor(weights, oracle_weights(q, k, mask), what="weights with fully-masked rows (bool mask)", suspects=on_w)
    expect_tensor(out, sdpa_float64(q, k, v, mask), what="output with fully-masked rows vs SDPA", suspects=on_out)
    additive = torch.zeros(2, 4, 5).masked_fill(~mask, float("-inf"))
    on_out, _ = both(q, k, v, additive)
    out_f, _ = sdpa(student, q, k, v, mask=additive, suspects=on_out)
    expect_tensor(out_f, sdpa_float64(q, k, v, mask), what="output with fully -inf rows in an additive mask",
                  suspects=on_out)


@pytest.mark.points(0.5)
def test_float16_with_a_mask(student, gen):
    q, k, v = (torch.randn(2, 6, 8, generator=gen).half() for _ in range(3))
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    on_out, _ = both(q, k, v, causal)
    out, weights = sdpa(student, q, k, v, mask=causal, suspects=on_out)
    expect_tensor(out, sdpa_float64(q, k, v, causal), what="float16 output with a causal bool mask", atol=5e-3,
                  rtol=5e-3, suspects=on_out)
    expect_shape(weights, (2, 6, 6), what="float16 weights")
    expect(weights.dtype == torch.float16, f"weights: got dtype {weights.dtype}, expected torch.float16")


@pytest.mark.points(1)
def test_no_dropout_when_not_training(student, gen):
    q, k, v = (torch.randn(4, 16, 8, generator=gen) for _ in range(3))
    on_out, on_w = both(q, k, v)
    out1, w1 = sdpa(student, q, k, v, dropout_p=0.5, training=False, suspects=on_w)
    _, w2 = sdpa(student, q, k, v, dropout_p=0.5)  # training defaults to False
    expect_repeatable(w1, w2, what="weights of two calls with dropout_p=0.5, training False and left at its default")
    expect_tensor(w1, oracle_weights(q, k), what="weights with dropout_p=0.5, training=False", suspects=on_w)
    expect_tensor(out1, sdpa_float64(q, k, v), what="output with dropout_p=0.5, training=False", suspects=on_out)
    expect_tensor(w2, w1, what="weights with dropout_p=0.5 and training left at its default (False)")


@pytest.mark.points(0.75)
@pytest.mark.parametrize("p", [0.1, 0.3])  # not 0.5: there 1/p == 1/(1-p) and keep-probability == drop-probability
def test_dropout_zeroes_weights_and_rescales_survivors(student, gen, p):
    q, k, v = torch.randn(4, 4, 32, 16, generator=gen), torch.randn(4, 4, 32, 16, generator=gen), \
        torch.randn(4, 4, 32, 8, generator=gen)
    _, on_w = both(q, k, v)
    _, w_eval = sdpa(student, q, k, v, dropout_p=p, training=False, suspects=on_w)  # focused first: no dropout
    expect_tensor(w_eval, oracle_weights(q, k), what=f"weights with dropout_p={p}, training=False", suspects=on_w)
    out, w = sdpa(student, q, k, v, dropout_p=p, training=True)
    expect_shape(w, (4, 4, 32, 32), what="weights in training mode")
    expect_tensor(out, w @ v, what="output in training mode vs returned_weights @ value",
                  suspects=returned_before_dropout(w_eval, w, p))
    # the returned weights are their own coefficients: values = I
    expect_dropout_on_weights(w, oracle_weights(q, k), torch.eye(32), p, what="weights returned in training mode",
                              tol=1e-5)


@pytest.mark.points(0.75)
def test_training_mode_with_a_mask_backward_goes_through_the_dropout(student, gen):
    """Training mode with a bool mask: the returned weights are the masked softmax's with a fresh draw per call,
    batch item and head; a forward and backward gives the gradients of float64 attention with that very draw."""
    p = 0.3
    q, k, v = (torch.randn(*shape, generator=gen, dtype=torch.float64) for shape in ((3, 2, 6, 8), (3, 2, 7, 8),
                                                                                     (3, 2, 7, 5)))
    mask = torch.ones(6, 7, dtype=torch.bool).tril(diagonal=1)  # every query sees at least two keys
    g_out, g_w = torch.randn(3, 2, 6, 5, generator=gen, dtype=torch.float64), \
        torch.randn(3, 2, 6, 7, generator=gen, dtype=torch.float64)
    call = student.scaled_dot_product.scaled_dot_product_attention
    got = call.grads(q, k, v, grad_output=(g_out, g_w), mask=mask, dropout_p=p, training=True)
    weights = oracle_weights(q, k, mask)
    expect_dropout_on_weights(got[0][1], weights, torch.eye(7, dtype=torch.float64), p,
                              what=f"weights returned with a causal bool mask, dropout_p={p}, training=True")
    keep = drawn_multipliers(got[0][1], weights, p)
    _, again = sdpa(student, q, k, v, mask=mask, dropout_p=p, training=True)
    expect_new_draw(got[0][1], again, what=f"weights of scaled_dot_product_attention(..., dropout_p={p}, training=True)")
    expect_grads_of(got, (q, k, v), attention_with_draw(keep, mask), (g_out, g_w), names=("query", "key", "value"),
                    what=f"scaled_dot_product_attention(float64, bool mask, dropout_p={p}, training=True) backward")


@pytest.mark.severe(OVERFLOW)
@pytest.mark.points(0.5)
def test_large_scores_stay_finite(student, gen):
    # every score ~150 (a constant shift: the softmax stays unsaturated, so a wrong scale shows on every draw)
    q0, k0 = torch.randn(2, 5, 8, generator=gen), torch.randn(2, 5, 8, generator=gen)
    q, k = shifted_qk(q0, k0)
    v = torch.randn(2, 5, 8, generator=gen)
    out, _ = expect_stable(lambda: sdpa(student, q, k, v), lambda: sdpa(student, q0, k0, v),
                                 what="scaled_dot_product_attention on scores of size ~150")
    expect_tensor(out, sdpa_float64(q, k, v), what="output for scores of size ~150", atol=1e-4, rtol=1e-4,
                  suspects=both(q, k, v)[0])


def _sdpa64(q, k, v, mask=None):
    """(output, weights) by float64 hand computation, differentiable (no fully-masked rows here)."""
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    e = torch.exp(s - s.amax(dim=-1, keepdim=True))
    w = e / e.sum(dim=-1, keepdim=True)
    return w @ v, w



@pytest.mark.points(0.25)
def test_views_and_one_tensor_as_query_key_and_value(student, gen):
    """Heads split as a model splits them (x.view(B, L, H, E).transpose(1, 2): not contiguous), a key sliced out of
    a wider tensor, and self-attention with one tensor passed as query, key and value."""
    q, k, v = (torch.randn(2, 3, n, 4, generator=gen) for n in (5, 6, 6))
    on_out, _ = both(q, k, v)
    out, _ = sdpa(student, transposed(q, 1, 2), sliced(k), transposed(v, 1, 2), suspects=on_out)
    expect_tensor(out, sdpa_float64(q, k, v), what="output with query and value transposed views, key a slice",
                  suspects=on_out)
    on_out, on_w = both(q, q, q)
    out, weights = sdpa(student, shared(q), shared(q), shared(q), suspects=on_out)
    expect_tensor(weights, oracle_weights(q, q), what="weights of (x, x, x): one tensor as query, key and value",
                  suspects=on_w)
    expect_tensor(out, sdpa_float64(q, q, q), what="output of (x, x, x)", suspects=on_out)

@pytest.mark.points(0.25)
def test_float64_gradients_match_the_oracle(student, gen):
    q, k, v = torch.randn(2, 5, 4, generator=gen, dtype=torch.float64), \
        torch.randn(2, 6, 4, generator=gen, dtype=torch.float64), torch.randn(2, 6, 3, generator=gen, dtype=torch.float64)
    mask = torch.ones(5, 6, dtype=torch.bool).tril(diagonal=1)
    g_out, g_w = torch.randn(2, 5, 3, generator=gen, dtype=torch.float64), \
        torch.randn(2, 5, 6, generator=gen, dtype=torch.float64)
    expect_grads(student.scaled_dot_product.scaled_dot_product_attention, (q, k, v), _sdpa64, (g_out, g_w),
                 what="scaled_dot_product_attention(float64, causal bool mask) backward",
                 names=("query", "key", "value"), mask=mask)


@pytest.mark.points(0.5)
def test_float64_keeps_float64_precision(student, gen):
    q, k, v = (torch.randn(2, 5, 7, generator=gen, dtype=torch.float64) * s for s in (4, 1, 1))  # scores ~10
    bias = torch.randn(5, 5, generator=gen, dtype=torch.float64) * 20  # float32 would round it by ~1e-6
    for mask in (None, bias):
        on_out, on_w = both(q, k, v, mask)
        out, weights = sdpa(student, q, k, v, mask=mask, suspects=on_w)
        what = "float64 " + ("with an additive float64 bias" if mask is not None else "without a mask")
        expect_tensor(weights, oracle_weights(q, k, mask), what=f"weights, {what}", suspects=on_w)
        expect_tensor(out, sdpa_float64(q, k, v, mask), what=f"output, {what}", suspects=on_out)
