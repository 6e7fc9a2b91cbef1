"""Public tests for `efficient_attention`: SDPA's mask, causal and dropout conventions, and a tiled FlashAttention."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from grader.testing.checks import expect, expect_finite, expect_shape, expect_tensor

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


@pytest.mark.points(1)
def test_sdpa_attention_shape(student):
    q, k, v = qkv(L=3, S=5, E=8, Ev=6)
    got = student.efficient_attention.sdpa_attention(q, k, v)
    expect_shape(got, (2, 2, 3, 6), what="sdpa_attention(q (2, 2, 3, 8), k (2, 2, 5, 8), v (2, 2, 5, 6))",
                 hint="the output has one row per query (L) and the value's last dim (Ev)")


@pytest.mark.points(2)
def test_sdpa_attention_bool_mask_true_means_attend(student):
    q, k, v = qkv(L=4, S=6)
    keep = torch.tensor([True, True, True, False, True, False]).expand(4, 6)  # keys 3 and 5 are padding
    got = student.efficient_attention.sdpa_attention(q, k, v, mask=keep)
    expect_tensor(got, hand_attention(q, k, v, keep), what="sdpa_attention(q, k, v, mask=keep)",
                  hint="SDPA's bool attn_mask uses True = may attend: pass it straight through (not ~mask, "
                       "not mask.float())")


@pytest.mark.points(2)
def test_sdpa_attention_is_causal_matches_the_seeds_standard_attention(student):
    # Seed 004 ("Flash Attention"): standard_attention(Q, K, V) = scaled_dot_product_attention(Q, K, V, is_causal=True)
    # on (2, 8, 1024, 64) fp16 CUDA tensors; here a small CPU version of the same call.
    q, k, v = qkv(L=16, S=16, E=64, Ev=64, B=2, H=8)
    got = student.efficient_attention.sdpa_attention(q, k, v, is_causal=True)
    with sdpa_kernel(SDPBackend.MATH):
        expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    expect_tensor(got, expected, what="sdpa_attention(q, k, v, is_causal=True) with L == S")
    k2, v2 = k.clone(), v.clone()
    k2[..., 10:, :] += 5.0
    v2[..., 10:, :] -= 5.0
    again = student.efficient_attention.sdpa_attention(q, k2, v2, is_causal=True)
    expect_tensor(again[..., :10, :], got[..., :10, :], what="outputs of queries 0..9 after changing keys 10..15",
                  hint="with causal attention query i sees only keys 0..i: the future must not leak in")


@pytest.mark.points(1.5)
def test_sdpa_attention_is_causal_is_bottom_right_when_fewer_queries(student):
    q, k, v = qkv(L=2, S=5)  # two new tokens at positions 3 and 4 of a 5-token sequence (a KV cache)
    got = student.efficient_attention.sdpa_attention(q, k, v, is_causal=True)
    keep = torch.ones(2, 5, dtype=torch.bool).tril(diagonal=5 - 2)  # query 0 sees keys 0..3, query 1 sees 0..4
    expect_tensor(got, hand_attention(q, k, v, keep), what="sdpa_attention(q (L=2), k (S=5), is_causal=True)",
                  hint="query i sits at position S - L + i; SDPA's own is_causal is top-left aligned when L != S: "
                       "build torch.ones(L, S, dtype=torch.bool).tril(diagonal=S - L) instead")


@pytest.mark.points(1)
def test_sdpa_attention_has_no_dropout_when_not_training(student):
    q, k, v = qkv(L=6, S=6)
    a = student.efficient_attention.sdpa_attention(q, k, v, dropout_p=0.5, training=False)
    b = student.efficient_attention.sdpa_attention(q, k, v, dropout_p=0.5, training=False)
    expect_tensor(a, hand_attention(q, k, v), what="sdpa_attention(..., dropout_p=0.5, training=False)",
                  hint="SDPA applies dropout whenever dropout_p > 0: pass dropout_p if training else 0.0")
    expect_tensor(b, a, what="a second call with training=False")


@pytest.mark.points(2)
def test_flash_attention_matches_float64_attention_with_a_ragged_last_tile(student):
    q, k, v = qkv(L=11, S=11, E=4, Ev=3, dtype=torch.float64)
    got = student.efficient_attention.flash_attention(q, k, v, block_size=4)  # tiles of 4, 4 and 3 keys
    expect_tensor(got, hand_attention(q, k, v), what="flash_attention(L = S = 11, block_size=4)",
                  hint="after each tile rescale the old denominator and accumulator by exp(m_old - m_new), "
                       "and do not forget the last, shorter tile")


@pytest.mark.points(1.5)
def test_flash_attention_causal_matches_sdpa(student):
    q, k, v = qkv(L=9, S=9)
    got = student.efficient_attention.flash_attention(q, k, v, is_causal=True, block_size=4)
    with sdpa_kernel(SDPBackend.MATH):
        expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    expect_finite(got, what="flash_attention(..., is_causal=True)")
    expect_tensor(got, expected, what="flash_attention(..., is_causal=True, block_size=4)")


@pytest.mark.points(1)
def test_flash_attention_never_builds_the_full_score_matrix(student):
    q, k, v = qkv(L=512, S=512, E=16, Ev=16, B=1, H=1)
    got, stats = student.efficient_attention.flash_attention.measure(q, k, v, block_size=32)
    expect_tensor(got, hand_attention(q, k, v), what="flash_attention(L = S = 512, block_size=32)")
    full = 512 * 512 * 4
    expect(stats["max_tensor_bytes"] < full / 4,
           f"the largest tensor made during flash_attention had {stats['max_tensor_bytes']:.0f} bytes, expected "
           f"well below the {full} bytes of the full 512 x 512 score matrix",
           hint="compute scores one tile of block_size keys at a time: (L, block_size), never (L, S)")
