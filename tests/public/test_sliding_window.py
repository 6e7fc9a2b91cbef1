"""Public tests for `sliding_window`: the window mask, banded attention without a T x T matrix, a rolling KV cache."""

from __future__ import annotations

import math

import pytest
import torch

from grader.testing.attention import sdpa_math
from grader.testing.checks import expect, expect_tensor

pytestmark = pytest.mark.exercise("sliding_window")


def window_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int) -> torch.Tensor:
    """float64 softmax(q k^T / sqrt(hd)) v where query i sees keys i - window + 1 .. i."""
    T = q.shape[-2]
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    keep = (j <= i) & (j > i - window)
    scores = q.double() @ k.double().transpose(-2, -1) / math.sqrt(q.shape[-1])
    return (torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1) @ v.double()).to(q.dtype)


def qkv(T: int, hd: int = 8, B: int = 2, H: int = 2, dtype=torch.float32, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(B, H, T, hd, generator=g, dtype=dtype) for _ in range(3))


@pytest.mark.points(3)
def test_mask_sees_itself_and_the_window_minus_one_before(student):
    got = student.sliding_window.sliding_window_mask(5, 2)
    expected = torch.tensor([[1, 0, 0, 0, 0],
                             [1, 1, 0, 0, 0],
                             [0, 1, 1, 0, 0],
                             [0, 0, 1, 1, 0],
                             [0, 0, 0, 1, 1]], dtype=torch.bool)
    expect_tensor(got, expected, what="sliding_window_mask(5, window=2)",
                  hint="query i sees keys i - window + 1 .. i (window keys in all, itself included); True = may attend")


@pytest.mark.points(3)
def test_mask_with_fewer_queries_is_bottom_right_aligned(student):
    got = student.sliding_window.sliding_window_mask(2, 3, kv_len=6)  # 2 new tokens at positions 4 and 5
    expected = torch.tensor([[0, 0, 1, 1, 1, 0],
                             [0, 0, 0, 1, 1, 1]], dtype=torch.bool)
    expect_tensor(got, expected, what="sliding_window_mask(2, window=3, kv_len=6)",
                  hint="query i sits at position kv_len - seq_len + i: the window ends there, not at i")


@pytest.mark.points(4)
def test_banded_attention_matches_float64_with_a_ragged_last_block(student):
    q, k, v = qkv(T=11, dtype=torch.float64)
    got = student.sliding_window.banded_attention(q, k, v, 3, block_size=4)  # blocks of 4, 4 and 3 queries
    expect_tensor(got, window_attention(q, k, v, 3), what="banded_attention(T=11, window=3, block_size=4)",
                  hint="block start..end-1 sees keys max(0, start - window + 1) .. end - 1; mask that tile bottom-right")
    again = student.sliding_window.banded_attention(q, k, v, 3, block_size=64)
    expect_tensor(again, sdpa_math(q, k, v, attn_mask=student.sliding_window.sliding_window_mask(11, 3)),
                  what="banded_attention(block_size=64 > T) vs SDPA with your mask")


@pytest.mark.points(3)
def test_banded_attention_never_builds_the_full_score_matrix(student):
    q, k, v = qkv(T=1024, hd=8, B=1, H=1)
    got, stats = student.sliding_window.banded_attention.measure(q, k, v, 8, block_size=32)
    expect_tensor(got, window_attention(q, k, v, 8), what="banded_attention(T=1024, window=8, block_size=32)")
    expect(stats["max_tensor_bytes"] <= 4 * got.numel() * 4,
           f"the largest tensor made during banded_attention had {stats['max_tensor_bytes']:.0f} bytes, expected at "
           f"most {4 * got.numel() * 4} (the full 1024 x 1024 scores have {1024 * 1024 * 4})",
           hint="score each block of queries against its band only: (block_size, block_size + window - 1)")


@pytest.mark.points(3)
def test_rolling_cache_returns_the_last_window_tokens_oldest_first(student):
    cache = student.sliding_window.RollingKVCache(1, 1, 3, 2)
    ks = torch.arange(14, dtype=torch.float32).reshape(1, 1, 7, 2)  # token t has key (2t, 2t + 1)
    for t in range(7):
        k_all, v_all = cache.invoke("update", ks[..., t:t + 1, :], -ks[..., t:t + 1, :])
    expect_tensor(k_all, ks[..., 4:, :], what="keys returned after 7 updates with window=3",
                  hint="keep only the last 3 tokens, oldest first (after a ring buffer wraps, reorder its slots)")
    expect_tensor(v_all, -ks[..., 4:, :], what="values returned after 7 updates with window=3")


@pytest.mark.points(4)
def test_decoding_token_by_token_equals_banded_attention(student):
    q, k, v = qkv(T=10, B=1)
    cache = student.sliding_window.RollingKVCache(1, 2, 4, 8)
    outs = [cache(q[..., t:t + 1, :], k[..., t:t + 1, :], v[..., t:t + 1, :]) for t in range(10)]
    expect_tensor(torch.cat(outs, dim=-2), window_attention(q, k, v, 4),
                  what="decoding 10 tokens one at a time with RollingKVCache(window=4)",
                  hint="forward attends the new token to the held keys plus its own, then caches its key and value")
