"""Public tests for `efficient_attention`: SDPA's mask, causal and dropout conventions, and a tiled FlashAttention;
heads that are transposed views."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from grader.testing.catalogue.efficient import formula_suspects, sdpa_suspects
from grader.testing.checks import expect, expect_call, expect_shape, expect_tensor
from grader.testing.diagnosis import Detector, Suspects, Variant, tag
from grader.testing.gradients import expect_grads
from grader.testing.layouts import transposed
from grader.testing.oracles import expect_dropout_on_weights, expect_repeatable

pytestmark = pytest.mark.exercise("efficient_attention")


def hand_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
    """float64 softmax(q k^T / sqrt(E)) v; `keep` is a bool mask, True = may attend (every row keeps a key)."""
    scores = q.double() @ k.double().transpose(-2, -1) / math.sqrt(q.shape[-1])
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    return (torch.softmax(scores, dim=-1) @ v.double()).to(q.dtype)


def qkv(L: int, S: int, E: int = 8, Ev: int = 8, B: int = 2, H: int = 2, dtype=torch.float32, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, H, L, E, generator=g, dtype=dtype), torch.randn(B, H, S, E, generator=g, dtype=dtype),
            torch.randn(B, H, S, Ev, generator=g, dtype=dtype))


@pytest.mark.points(0.5)
def test_sdpa_attention_shape(student):
    q, k, v = qkv(L=3, S=5, E=8, Ev=6)
    got = student.efficient_attention.sdpa_attention(q, k, v)
    expect_shape(got, (2, 2, 3, 6), what="sdpa_attention(q (2, 2, 3, 8), k (2, 2, 5, 8), v (2, 2, 5, 6))")


@pytest.mark.points(1)
def test_sdpa_attention_bool_mask_true_means_attend(student):
    q, k, v = qkv(L=4, S=6)
    keep = torch.tensor([True, True, True, False, True, False]).expand(4, 6)  # keys 3 and 5 are padding
    expect_call(lambda: student.efficient_attention.sdpa_attention(q, k, v, mask=keep), hand_attention(q, k, v, keep),
                what="sdpa_attention(q, k, v, mask=keep)", suspects=sdpa_suspects(q, k, v, mask=keep))


@pytest.mark.points(1)
def test_sdpa_attention_additive_mask_is_added(student):
    q, k, v = qkv(L=4, S=6)
    keep = torch.tensor([True, True, True, False, True, False]).expand(4, 6)
    additive = torch.zeros(4, 6).masked_fill(~keep, float("-inf")) - 0.3 * torch.arange(6.0)  # a bias too
    want = (torch.softmax(q.double() @ k.double().transpose(-2, -1) / math.sqrt(8) + additive.double(), dim=-1)
            @ v.double()).float()
    expect_call(lambda: student.efficient_attention.sdpa_attention(q, k, v, mask=additive), want,
                what="sdpa_attention(q, k, v, mask=additive 0/-inf mask with a bias)",
                suspects=sdpa_suspects(q, k, v, mask=additive))


@pytest.mark.points(1.5)
def test_sdpa_attention_is_causal_matches_the_seeds_standard_attention(student):
    # Seed 004 ("Flash Attention"): standard_attention(Q, K, V) = scaled_dot_product_attention(Q, K, V, is_causal=True)
    # on (2, 8, 1024, 64) fp16 CUDA tensors; here a small CPU version of the same call.
    q, k, v = qkv(L=16, S=16, E=64, Ev=64, B=2, H=8)
    with sdpa_kernel(SDPBackend.MATH):
        expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    got = expect_call(lambda: student.efficient_attention.sdpa_attention(q, k, v, is_causal=True), expected,
                      what="sdpa_attention(q, k, v, is_causal=True) with L == S",
                      suspects=sdpa_suspects(q, k, v, is_causal=True))
    k2, v2 = k.clone(), v.clone()
    k2[..., 10:, :] += 5.0
    v2[..., 10:, :] -= 5.0
    again = student.efficient_attention.sdpa_attention(q, k2, v2, is_causal=True)
    expect_tensor(again[..., :10, :], got[..., :10, :], what="outputs of queries 0..9 after changing keys 10..15")


@pytest.mark.points(1.5)
def test_sdpa_attention_is_causal_is_bottom_right_when_fewer_queries(student):
    q, k, v = qkv(L=2, S=5)  # two new tokens at positions 3 and 4 of a 5-token sequence (a KV cache)
    keep = torch.ones(2, 5, dtype=torch.bool).tril(diagonal=5 - 2)  # query 0 sees keys 0..3, query 1 sees 0..4
    expect_call(lambda: student.efficient_attention.sdpa_attention(q, k, v, is_causal=True),
                hand_attention(q, k, v, keep), what="sdpa_attention(q (L=2), k (S=5), is_causal=True)",
                suspects=sdpa_suspects(q, k, v, is_causal=True))


@pytest.mark.points(1)
def test_sdpa_attention_has_no_dropout_when_not_training(student):
    q, k, v = qkv(L=6, S=6)
    a = student.efficient_attention.sdpa_attention(q, k, v, dropout_p=0.5, training=False)
    b = student.efficient_attention.sdpa_attention(q, k, v, dropout_p=0.5, training=False)
    expect_repeatable(a, b, what="two calls of sdpa_attention(..., dropout_p=0.5, training=False)")
    expect_tensor(a, hand_attention(q, k, v), what="sdpa_attention(..., dropout_p=0.5, training=False)",
                  suspects=sdpa_suspects(q, k, v))


@pytest.mark.points(1)
def test_sdpa_attention_drops_a_fraction_p_in_training(student):
    q, k, v = qkv(L=24, S=24, E=8, Ev=48, B=1, H=2)  # Ev > S: each value row's share of the output is recoverable
    p = 0.2
    weights = torch.softmax(q.double() @ k.double().transpose(-2, -1) / math.sqrt(8), dim=-1)
    got = student.efficient_attention.sdpa_attention(q, k, v, dropout_p=p, training=True)
    expect_dropout_on_weights(got, weights, v, p, what=f"sdpa_attention(..., dropout_p={p}, training=True)", tol=1e-4)


@pytest.mark.points(1)
def test_flash_attention_matches_float64_attention_with_a_ragged_last_tile(student):
    q, k, v = qkv(L=11, S=11, E=4, Ev=3, dtype=torch.float64)
    expect_call(lambda: student.efficient_attention.flash_attention(q, k, v, block_size=4), hand_attention(q, k, v),
                what="flash_attention(L = S = 11, block_size=4): tiles of 4, 4 and 3 keys",
                suspects=formula_suspects(q, k, v, causal_default=True) + ragged(q, k, v, 4))


@pytest.mark.points(1.5)
def test_flash_attention_causal_matches_sdpa(student):
    flash = student.efficient_attention.flash_attention
    for L, S in ((9, 9), (4, 9)):  # fewer queries: bottom-right, query i at position S - L + i
        q, k, v = qkv(L=L, S=S)
        keep = torch.ones(L, S, dtype=torch.bool).tril(diagonal=S - L)
        expect_call(lambda: flash(q, k, v, is_causal=True, block_size=4), hand_attention(q, k, v, keep),  # noqa: B023
                    what=f"flash_attention(L={L}, S={S}, is_causal=True, block_size=4)",
                    suspects=formula_suspects(q, k, v, is_causal=True))


def _heads_split_by_view(student, fn):
    q, k, v = qkv(L=5, S=7, E=4, Ev=3, B=2, H=3)
    kwargs = {"block_size": 3} if fn == "flash_attention" else {}
    expect_call(lambda: getattr(student.efficient_attention, fn)(*(transposed(t, 1, 2) for t in (q, k, v)), **kwargs),
                hand_attention(q, k, v), what=f"{fn}(q, k, v) with heads made by .view(B, L, H, E).transpose(1, 2)",
                suspects=formula_suspects(q, k, v, causal_default=fn == "flash_attention"))


# Two tests, not one parametrized: a notebook's test cell (nbgrader) runs a test function with the student alone.
@pytest.mark.points(0.25)
def test_sdpa_heads_split_by_view_and_transpose(student):
    """Heads as a model hands them over: x.view(B, L, H, E).transpose(1, 2), not contiguous (a .view inside
    attention fails on it; .reshape does not)."""
    _heads_split_by_view(student, "sdpa_attention")


@pytest.mark.points(0.25)
def test_flash_heads_split_by_view_and_transpose(student):
    """The same heads for flash_attention."""
    _heads_split_by_view(student, "flash_attention")


@pytest.mark.points(0.5)
def test_flash_attention_never_builds_the_full_score_matrix(student):
    q, k, v = qkv(L=512, S=512, E=16, Ev=16, B=1, H=1)
    got, stats = student.efficient_attention.flash_attention.measure(q, k, v, block_size=32)
    expect_tensor(got, hand_attention(q, k, v), what="flash_attention(L = S = 512, block_size=32)")
    full = 512 * 512 * 4
    expect(stats["max_tensor_bytes"] < full / 4,
           f"the largest tensor made during flash_attention had {stats['max_tensor_bytes']:.0f} bytes, expected "
           f"well below the {full} bytes of the full 512 x 512 score matrix\n  " + tag(
               "memory-full-matrix", "a tensor as large as the whole score matrix was made: one (L, block_size) "
               "tile of scores at a time"))


@pytest.mark.points(1)
def test_flash_attention_gradients_and_very_negative_scores(student):
    q, k, v = qkv(L=6, S=10, E=4, Ev=3, B=1, dtype=torch.float64)
    g = torch.linspace(-1.0, 1.0, 36, dtype=torch.float64).reshape(1, 2, 6, 3)
    keep = torch.ones(6, 10, dtype=torch.bool).tril(diagonal=4)
    expect_grads(student.efficient_attention.flash_attention, (q, k, v),
                 lambda q, k, v, **kw: hand_attention(q, k, v, keep), g, names=("query", "key", "value"),
                 what="flash_attention(float64, L=6, S=10, is_causal=True, block_size=4) backward",
                 suspects=formula_suspects(q, k, v, is_causal=True), is_causal=True, block_size=4)
    low_q, low_k = q.clone(), k.clone()
    low_q[..., 0], low_k[..., 0] = 40.0, -50.0  # every score near -1000: exp(score - 0) underflows to 0
    expect_call(lambda: student.efficient_attention.flash_attention(low_q, low_k, v, block_size=4),
                hand_attention(low_q, low_k, v), what="flash_attention with every score near -1000",
                suspects=formula_suspects(low_q, low_k, v, causal_default=True) + UNDERFLOWS)


UNDERFLOWS = Suspects((Detector("flash-max-init, softmax-no-max", lambda got, want: (
    "rows of zeros or NaN where every score is far below 0 (and right values for ordinary scores): exp(score - m) "
    "underflowed to 0 for every key and the row became 0 / 0; the running max starts at 0 instead of -inf, or is not "
    "subtracted") if bool((got.nan_to_num(0.0) == 0).all(-1).any()) else None),))


def ragged(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_size: int):
    """Attention over the full tiles only: what dropping the ragged last tile gives."""
    full = k.shape[-2] - k.shape[-2] % block_size
    return Suspects((Variant("ragged-dropped", f"attention over the first {full} keys only (the last, shorter "
                             "tile dropped)", lambda: hand_attention(q, k[..., :full, :], v[..., :full, :])),))
