"""Hidden tests for `scaled_dot_product`: SDPA (math) and float64 oracles, masks, scale, fp16, dropout."""

from __future__ import annotations

import math

import pytest
import torch

from grader.testing.attention import sdpa_float64
from grader.testing.checks import expect, expect_finite, expect_shape, expect_tensor
from grader.testing.gradients import expect_grads
from grader.testing.oracles import expect_dropout_on_weights
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


def sdpa(student, *args, **kwargs):
    got = student.scaled_dot_product.scaled_dot_product_attention(*args, **kwargs)
    expect(isinstance(got, tuple) and len(got) == 2, f"got {type(got).__name__}, expected a tuple (output, weights)",
           "return output, weights")
    return got


SHAPES = {  # name: (query, key, value) shapes
    "3-D, L = S": ((2, 5, 8), (2, 5, 8), (2, 5, 8)),
    "4-D heads, L != S": ((2, 3, 4, 6), (2, 3, 7, 6), (2, 3, 7, 6)),
    "4-D, Ev != E": ((3, 2, 5, 4), (3, 2, 6, 4), (3, 2, 6, 9)),
}


@pytest.mark.points(0.5)
@pytest.mark.parametrize("case", list(SHAPES))
def test_output_matches_sdpa_without_mask(student, gen, case):
    q, k, v = (torch.randn(*s, generator=gen) for s in SHAPES[case])
    out, _ = sdpa(student, q, k, v)
    expect_tensor(out, sdpa_float64(q, k, v), what=f"output ({case})",
                  hint="softmax(Q @ K^T / sqrt(E), dim=-1) @ V, with key.transpose(-2, -1)")


@pytest.mark.points(1)
def test_weights_match_float64_hand_computation(student, gen):
    q, k, v = torch.randn(2, 3, 5, 8, generator=gen), torch.randn(2, 3, 6, 8, generator=gen), \
        torch.randn(2, 3, 6, 4, generator=gen)
    _, weights = sdpa(student, q, k, v)
    expect_tensor(weights, oracle_weights(q, k), what="weights (2, 3, L=5, S=6), E = 8",
                  hint="scale by 1/sqrt(E) = 1/sqrt(8), not by 1/E or 1/E**2; softmax over the keys (dim=-1)")
    sums = weights.double().sum(dim=-1)
    expect_tensor(sums, torch.ones_like(sums), what="weights.sum(dim=-1)", atol=1e-5, rtol=0,
                  hint="every query's weights over the keys must sum to 1: softmax along dim=-1, not dim=-2")


@pytest.mark.points(1)
def test_random_bool_mask_matches_sdpa(student, gen):
    q, k, v = (torch.randn(2, 2, 6, 4, generator=gen) for _ in range(3))
    mask = torch.rand(2, 2, 6, 6, generator=gen) < 0.6
    mask[..., 0] = True  # every query keeps at least one key
    out, weights = sdpa(student, q, k, v, mask=mask)
    expect(bool((weights.masked_select(~mask) == 0).all()), "weights are non-zero where the bool mask is False",
           "bool masks follow SDPA: True = may attend, False = blocked (masked_fill(~mask, -inf))")
    expect_tensor(weights, oracle_weights(q, k, mask), what="weights with a random bool mask")
    expect_tensor(out, sdpa_float64(q, k, v, mask), what="output with a random bool mask vs SDPA")


@pytest.mark.points(0.5)
def test_bool_mask_broadcasts_over_batch_dims(student, gen):
    q, k, v = torch.randn(2, 3, 4, 4, generator=gen), torch.randn(2, 3, 5, 4, generator=gen), \
        torch.randn(2, 3, 5, 4, generator=gen)
    mask = torch.ones(4, 5, dtype=torch.bool).tril(diagonal=1)  # (L, S), shared by every batch and head
    out, _ = sdpa(student, q, k, v, mask=mask)
    expect_tensor(out, sdpa_float64(q, k, v, mask), what="output with an (L, S) bool mask on (2, 3, L, S) scores",
                  hint="the mask is broadcastable to (..., L, S): masked_fill broadcasts it for you")
    q, k, v = torch.randn(3, 2, 4, 4, generator=gen), torch.randn(3, 2, 5, 4, generator=gen), \
        torch.randn(3, 2, 5, 4, generator=gen)
    pad = torch.tensor([[True] * 5, [True] * 2 + [False] * 3, [True] * 4 + [False]])[:, None, None, :]
    out, weights = sdpa(student, q, k, v, mask=pad)  # (B, 1, 1, S) with B = 3: a padding mask per batch item
    expect_tensor(weights, oracle_weights(q, k, pad), what="weights with a (B=3, 1, 1, S) padding mask",
                  hint="use the mask as it is: do not squeeze or reshape it (squeeze() lines the batch up with the "
                       "queries when B > 1)")
    expect_tensor(out, sdpa_float64(q, k, v, pad), what="output with a (B=3, 1, 1, S) padding mask vs SDPA")


@pytest.mark.points(1)
def test_additive_alibi_bias_is_added_after_scaling(student, gen):
    q, k, v = (torch.randn(2, 6, 8, generator=gen) * 2 for _ in range(3))
    pos = torch.arange(6)
    bias = -0.3 * (pos[:, None] - pos[None, :]).abs().float()  # (L, S): finite, non-zero off the diagonal
    out, weights = sdpa(student, q, k, v, mask=bias)
    expect_tensor(weights, oracle_weights(q, k, bias), what="weights with an additive bias -0.3*|i-j|",
                  hint="SDPA adds a float mask to the SCALED scores: softmax(Q K^T / sqrt(E) + mask); "
                       "adding it before the scaling shrinks the bias, and it is not a 0/1 keep-mask")
    expect_tensor(out, sdpa_float64(q, k, v, bias), what="output with an additive bias vs SDPA")


@pytest.mark.points(0.5)
def test_additive_causal_mask_blocks_the_future(student, gen):
    q, k, v = (torch.randn(2, 5, 4, generator=gen) for _ in range(3))
    additive = torch.full((5, 5), float("-inf")).triu(diagonal=1)  # 0 on and below the diagonal, -inf above
    out, weights = sdpa(student, q, k, v, mask=additive)
    expect_finite(out, what="output with an additive 0/-inf causal mask",
                  hint="a float mask holds 0 (keep) and -inf (block): add it; `mask == 0` would block the kept ones")
    expect(bool((weights[..., 0, 1:] == 0).all()), "query 0 gives weight to future keys under a causal additive mask",
           "a float mask is added to the scores: -inf there means weight exactly 0")
    expect_tensor(out, sdpa_float64(q, k, v, additive), what="output with an additive causal mask vs SDPA")


@pytest.mark.points(0.5)
def test_future_keys_do_not_change_earlier_outputs(student, gen):
    q, k, v = (torch.randn(1, 7, 4, generator=gen) for _ in range(3))
    causal = torch.ones(7, 7, dtype=torch.bool).tril()
    out, _ = sdpa(student, q, k, v, mask=causal)
    expect_tensor(out, sdpa_float64(q, k, v, causal), what="output with a (7, 7) causal bool mask vs SDPA")
    k2, v2 = k.clone(), v.clone()
    k2[:, 4:] += 10.0 * torch.randn(1, 3, 4, generator=gen)
    v2[:, 4:] += 10.0
    out2, _ = sdpa(student, q, k2, v2, mask=causal)
    expect_tensor(out2[:, :4], out[:, :4], what="outputs of queries 0..3 after changing keys/values 4..6",
                  hint="with a causal bool mask (True = may attend), query t must not see keys after t")


@pytest.mark.points(0.75)
def test_explicit_scale_is_used(student, gen):
    q, k, v = torch.randn(2, 4, 6, generator=gen), torch.randn(2, 5, 6, generator=gen), \
        torch.randn(2, 5, 3, generator=gen)
    out, weights = sdpa(student, q, k, v, scale=0.7)
    expect_tensor(weights, oracle_weights(q, k, scale=0.7), what="weights with scale=0.7",
                  hint="scale multiplies Q K^T; only scale=None means 1/sqrt(E)")
    expect_tensor(out, sdpa_float64(q, k, v, scale=0.7), what="output with scale=0.7 vs SDPA")
    out, weights = sdpa(student, q, k, v, scale=0.0)  # a real scale: every key gets the same weight
    expect_tensor(weights, oracle_weights(q, k, scale=0.0), what="weights with scale=0.0",
                  hint="scale=0.0 is a scale, not a missing one: test `scale is None`, not `scale or 1/sqrt(E)`")
    expect_tensor(out, sdpa_float64(q, k, v, scale=0.0), what="output with scale=0.0 vs SDPA")


@pytest.mark.points(0.75)
def test_fully_masked_rows_give_zero_and_no_nan(student, gen):
    q, k, v = torch.randn(2, 4, 4, generator=gen), torch.randn(2, 5, 4, generator=gen), \
        torch.randn(2, 5, 3, generator=gen)
    mask = torch.rand(2, 4, 5, generator=gen) < 0.7
    mask[..., 0] = True
    mask[0, 2] = False  # batch 0, query 2: no key at all
    mask[1, 0] = False
    out, weights = sdpa(student, q, k, v, mask=mask)
    expect_finite(weights, what="weights with fully-masked query rows",
                  hint="softmax over a row of -inf is NaN: give rows with no visible key zero weights")
    expect_tensor(weights, oracle_weights(q, k, mask), what="weights with fully-masked rows (bool mask)",
                  hint="a query with no visible key gets all-zero weights (as SDPA), not a uniform row (-1e9 fill)")
    expect_tensor(out, sdpa_float64(q, k, v, mask), what="output with fully-masked rows vs SDPA")
    additive = torch.zeros(2, 4, 5).masked_fill(~mask, float("-inf"))
    out_f, _ = sdpa(student, q, k, v, mask=additive)
    expect_finite(out_f, what="output with fully -inf rows in an additive mask")
    expect_tensor(out_f, sdpa_float64(q, k, v, mask), what="output with fully -inf rows in an additive mask")


@pytest.mark.points(0.5)
def test_float16_with_a_mask(student, gen):
    q, k, v = (torch.randn(2, 6, 8, generator=gen).half() for _ in range(3))
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    out, weights = sdpa(student, q, k, v, mask=causal)
    expect_tensor(out, sdpa_float64(q, k, v, causal), what="float16 output with a causal bool mask", atol=5e-3,
                  rtol=5e-3, hint="fill with float('-inf'): -1e9 does not fit in float16 (max 65504) and raises")
    expect_shape(weights, (2, 6, 6), what="float16 weights")
    expect(weights.dtype == torch.float16, f"weights: got dtype {weights.dtype}, expected torch.float16")


@pytest.mark.points(1)
def test_no_dropout_when_not_training(student, gen):
    q, k, v = (torch.randn(4, 16, 8, generator=gen) for _ in range(3))
    out1, w1 = sdpa(student, q, k, v, dropout_p=0.5, training=False)
    out2, w2 = sdpa(student, q, k, v, dropout_p=0.5)  # training defaults to False
    hint = "dropout only when training=True: with training=False the weights are used as they are"
    expect_tensor(w1, oracle_weights(q, k), what="weights with dropout_p=0.5, training=False", hint=hint)
    expect_tensor(out1, sdpa_float64(q, k, v), what="output with dropout_p=0.5, training=False", hint=hint)
    expect_tensor(out2, out1, what="a second call with dropout_p=0.5 at eval", hint=hint)
    expect_tensor(w2, w1, what="weights with dropout_p=0.5 and training left at its default (False)", hint=hint)


@pytest.mark.points(0.75)
@pytest.mark.parametrize("p", [0.1, 0.3])  # not 0.5: there 1/p == 1/(1-p) and keep-probability == drop-probability
def test_dropout_zeroes_weights_and_rescales_survivors(student, gen, p):
    q, k, v = torch.randn(4, 4, 32, 16, generator=gen), torch.randn(4, 4, 32, 16, generator=gen), \
        torch.randn(4, 4, 32, 8, generator=gen)
    out, w = sdpa(student, q, k, v, dropout_p=p, training=True)
    expect_shape(w, (4, 4, 32, 32), what="weights in training mode")
    # the returned weights are their own coefficients: values = I
    expect_dropout_on_weights(w, oracle_weights(q, k), torch.eye(32), p, what="weights returned in training mode",
                              tol=1e-5)
    expect_tensor(out, w @ v, what="output in training mode vs returned_weights @ value",
                  hint="return the weights you actually used (after dropout), and output = those weights @ value")


@pytest.mark.severe(OVERFLOW)
@pytest.mark.points(0.5)
def test_large_scores_stay_finite(student, gen):
    # every score ~150 (a constant shift: the softmax stays unsaturated, so a wrong scale shows on every draw)
    q0, k0 = torch.randn(2, 5, 8, generator=gen), torch.randn(2, 5, 8, generator=gen)
    q, k = shifted_qk(q0, k0)
    v = torch.randn(2, 5, 8, generator=gen)
    out, _ = expect_stable(lambda: sdpa(student, q, k, v), lambda: sdpa(student, q0, k0, v),
                                 what="scaled_dot_product_attention on scores of size ~150")
    expect_tensor(out, sdpa_float64(q, k, v), what="output for scores of size ~150", atol=1e-4, rtol=1e-4)


def _sdpa64(q, k, v, mask=None):
    """(output, weights) by float64 hand computation, differentiable (no fully-masked rows here)."""
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    e = torch.exp(s - s.amax(dim=-1, keepdim=True))
    w = e / e.sum(dim=-1, keepdim=True)
    return w @ v, w


@pytest.mark.points(0.5)
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
    hint = ("keep float64 inputs in float64: no .float(), no float32 scale tensor (torch.tensor(E) is float32), "
            "mask.to(scores.dtype) for an additive mask")
    for mask in (None, bias):
        out, weights = sdpa(student, q, k, v, mask=mask)
        what = "float64 " + ("with an additive float64 bias" if mask is not None else "without a mask")
        expect_tensor(weights, oracle_weights(q, k, mask), what=f"weights, {what}", hint=hint)
        expect_tensor(out, sdpa_float64(q, k, v, mask), what=f"output, {what}", hint=hint)
