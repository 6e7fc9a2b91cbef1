"""Hidden tests for `sliding_window`: the mask, banded attention (values, memory, gradients, dtypes), the rolling cache."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from grader.protocol.errors import StudentError
from grader.testing.attention import sdpa_fused, sdpa_math
from grader.testing.catalogue.rolling import (
    buffer_suspects,
    decode_suspects,
    held_suspects,
    reset_suspects,
)
from grader.testing.catalogue.window import banded_suspects, mask_suspects
from grader.testing.checks import expect, expect_call, expect_shape, expect_tensor, fail
from grader.testing.diagnosis import tag
from grader.testing.devices import expect_built_on_meta, expect_on_input_device
from grader.testing.gradients import expect_grads
from grader.testing.precision import expect_no_worse_than
from grader.testing.regimes import expect_stable, shifted_qk

pytestmark = pytest.mark.exercise("sliding_window")

# Hints say what the specification asks and name no mistake: a mistake is named only by a diagnosis that saw it
# (grader.testing.catalogue.window), since a broad test fails for many different ones.
WINDOW_HINT = "see sliding_window_mask's docstring: which keys query i may see"
BAND_HINT = "see banded_attention's docstring: the result equals the sliding-window attention of the whole sequence"
RING_HINT = "see RollingKVCache.update's docstring: which tokens update returns, and in what order"
OVERFLOW = "outputs become inf or NaN for inputs of ordinary size (a softmax without the max subtracted)"


def keep_mask(L: int, S: int, window: int) -> torch.Tensor:
    """The oracle's mask, built unlike the exercise: keys up to S - L + i, minus keys up to S - L + i - window."""
    ones = torch.ones(L, S, dtype=torch.bool)
    return ones.tril(S - L) & ~ones.tril(S - L - window)


def hand_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """float64 softmax(q k^T / sqrt(hd) masked by `keep`) v, differentiable, in the inputs' (float64) dtype."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1) @ v


def window64(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int) -> torch.Tensor:
    T = q.shape[-2]
    return hand_attention(q.double(), k.double(), v.double(), keep_mask(T, T, window)).to(q.dtype)


def qkv(gen: torch.Generator, B: int, H: int, T: int, hd: int, hdv: int | None = None, dtype=torch.float32):
    return (torch.randn(B, H, T, hd, generator=gen, dtype=dtype), torch.randn(B, H, T, hd, generator=gen, dtype=dtype),
            torch.randn(B, H, T, hdv or hd, generator=gen, dtype=dtype))


def expect_refused(make, what: str, hint: str) -> None:
    __tracebackhide__ = True
    with pytest.raises(StudentError) as info:
        make()
        fail(f"{what} returned without an error, expected a ValueError", hint)
    expect(info.value.kind != "not_implemented", f"{what}: got {info.value.message}, expected a ValueError", hint)
    expect(info.value.exc_type == "ValueError", f"{what}: got {info.value.exc_type}, expected a ValueError", hint)


# ---------------------------------------------------------------------------------------------- sliding_window_mask
@pytest.mark.points(0.25)
@pytest.mark.parametrize("window", [1, 3, 7, 12])
def test_mask_matches_the_definition(student, window):
    got = student.sliding_window.sliding_window_mask(7, window)
    expect_shape(got, (7, 7), what=f"sliding_window_mask(7, {window})")
    expect(got.dtype == torch.bool, f"sliding_window_mask: got dtype {got.dtype}, expected torch.bool",
           "SDPA reads a float mask as a bias to add: return a boolean tensor (True = may attend)")
    expect_tensor(got, keep_mask(7, 7, window), what=f"sliding_window_mask(7, window={window})", hint=WINDOW_HINT,
                  suspects=mask_suspects(7, window))


@pytest.mark.points(0.25)
@pytest.mark.parametrize(("L", "S", "window"), [(3, 10, 4), (1, 6, 3), (4, 4, 2), (2, 9, 12)])
def test_mask_with_fewer_queries_is_bottom_right_aligned(student, L, S, window):
    got = student.sliding_window.sliding_window_mask(L, window, kv_len=S)
    expect_tensor(got, keep_mask(L, S, window), what=f"sliding_window_mask({L}, {window}, kv_len={S})", hint=WINDOW_HINT,
                  suspects=mask_suspects(L, window, S))


@pytest.mark.points(0.5)
def test_mask_is_made_on_the_requested_device(student):
    got = student.sliding_window.sliding_window_mask(5, 2, device="cpu")
    expect_tensor(got, keep_mask(5, 5, 2), what="sliding_window_mask(5, 2, device='cpu')", hint=WINDOW_HINT)
    expect_on_input_device(lambda: student.sliding_window.sliding_window_mask.on_meta(5, 2, device="meta", kv_len=8),
                           what="sliding_window_mask(5, 2, device='meta', kv_len=8)",
                           hint="make the mask on the device you were given: torch.arange(..., device=device)")


@pytest.mark.points(0.5)
def test_mask_refuses_a_window_below_one(student):
    expect_tensor(student.sliding_window.sliding_window_mask(4, 1), torch.eye(4, dtype=torch.bool),
                  what="sliding_window_mask(4, window=1)", hint="window = 1: each query sees only itself")
    for window in (0, -2):
        expect_refused(lambda w=window: student.sliding_window.sliding_window_mask(4, w),
                       f"sliding_window_mask(4, window={window})",
                       "a window of 0 keys leaves every query with nothing to attend to: raise ValueError for window < 1")


# ---------------------------------------------------------------------------------------------- banded_attention
@pytest.mark.points(1.5)
def test_banded_matches_sdpa_math_with_the_window_mask(student, gen):
    q, k, v = qkv(gen, B=2, H=3, T=37, hd=8, hdv=6)
    expect_call(lambda: student.sliding_window.banded_attention(q, k, v, 5, block_size=8),  # 37 = 4 * 8 + 5: ragged
                sdpa_math(q, k, v, attn_mask=keep_mask(37, 37, 5)), suspects=banded_suspects(q, k, v, 5, 8),
                what="banded_attention(B=2, H=3, T=37, hd=8, hdv=6, window=5, block_size=8)", hint=BAND_HINT)


@pytest.mark.points(0.25)
@pytest.mark.parametrize(("window", "block_size"), [(1, 4), (3, 1), (6, 64), (5, 29), (29, 8), (40, 16)])
def test_banded_float64_edges(student, gen, window, block_size):
    q, k, v = qkv(gen, B=1, H=2, T=29, hd=4, hdv=3, dtype=torch.float64)
    what = f"banded_attention(float64, T=29, window={window}, block_size={block_size})"
    hint = {1: "window = 1: every query sees only itself, so the output is v", 29: "window = T is causal attention",
            40: "a window longer than T is causal attention"}.get(window, BAND_HINT)
    got = expect_call(lambda: student.sliding_window.banded_attention(q, k, v, window, block_size=block_size),
                      window64(q, k, v, window), what=what, hint=hint,
                      suspects=banded_suspects(q, k, v, window, block_size))
    if window == 1:
        expect_tensor(got, v, what=what + " vs v itself", hint=hint)
    if window >= 29:
        expect_tensor(got, sdpa_math(q, k, v, is_causal=True), what=what + " vs SDPA's is_causal", hint=hint)


@pytest.mark.points(0.5)
def test_banded_default_block_size_with_a_ragged_last_block(student, gen):
    q, k, v = qkv(gen, B=1, H=2, T=150, hd=4, dtype=torch.float64)  # 150 = 2 * 64 + 22
    expect_call(lambda: student.sliding_window.banded_attention(q, k, v, 20), window64(q, k, v, 20),
                what="banded_attention(T=150, window=20) with the default block_size", hint=BAND_HINT,
                suspects=banded_suspects(q, k, v, 20))


@pytest.mark.points(0.5)
def test_banded_sees_neither_the_future_nor_beyond_the_window(student, gen):
    q, k, v = qkv(gen, B=2, H=2, T=24, hd=4)
    got = student.sliding_window.banded_attention(q, k, v, 6, block_size=5)
    k2, v2 = k.clone(), v.clone()
    k2[..., 9, :] += 5.0  # key 9 is seen by queries 9..14 only
    v2[..., 9, :] -= 5.0
    again = student.sliding_window.banded_attention(q, k2, v2, 6, block_size=5)
    outside = [i for i in range(24) if not 9 <= i <= 14]
    expect_tensor(again[..., outside, :], got[..., outside, :], what="outputs of queries outside 9..14 after changing "
                  "key 9 (window=6)", hint=WINDOW_HINT)
    expect(not torch.allclose(again[..., 9:15, :], got[..., 9:15, :]), "changing key and value 9 did not change queries "
           "9..14, which see it", WINDOW_HINT)


@pytest.mark.points(1.5)
def test_banded_memory_grows_with_t_times_window_not_t_squared(student, gen):
    T, window, block = 4096, 16, 64
    q, k, v = qkv(gen, B=1, H=2, T=T, hd=8)
    got, stats = student.sliding_window.banded_attention.measure(q, k, v, window, block_size=block)
    expect_tensor(got, sdpa_fused(q, k, v, attn_mask=keep_mask(T, T, window)), hint=BAND_HINT,
                  what=f"banded_attention(T={T}, window={window}, block_size={block})",
                  suspects=banded_suspects(q, k, v, window, block))
    full, out_bytes = 2 * T * T * 4, got.numel() * 4
    tile = 2 * block * (block + window - 1) * 4
    hint = ("score only each block's band of keys per head, never (T, T), and not "
            "(block_size, end) either (all earlier keys, masked): that grows with T * T in time and T * block in memory")
    expect(stats["max_tensor_bytes"] <= 4 * out_bytes,
           f"the largest tensor made during banded_attention had {stats['max_tensor_bytes']:.0f} bytes, expected at "
           f"most {4 * out_bytes} (four times the output; one band tile has {tile}, the full T x T scores {full})", hint)
    outside = stats.get("max_memory_bytes")  # the sandbox's memory cgroup, read by the grader (None without one)
    expect(outside is None or outside < full // 2, f"the sandbox's memory grew by {outside or 0:.0f} bytes during "
           f"banded_attention, expected below {full // 2} (the full T x T scores have {full})", hint)


@pytest.mark.points(1)
def test_banded_float64_gradients_match_the_oracle(student, gen):
    q, k, v = qkv(gen, B=1, H=2, T=13, hd=4, hdv=3, dtype=torch.float64)
    g = torch.randn(1, 2, 13, 3, generator=gen, dtype=torch.float64)
    expect_grads(student.sliding_window.banded_attention, (q, k, v),
                 lambda a, b, c, window, block_size: hand_attention(a, b, c, keep_mask(13, 13, window)), g,
                 what="banded_attention(float64, T=13, window=4, block_size=5) backward",
                 names=("query", "key", "value"), window=4, block_size=5)


@pytest.mark.points(0.375)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_banded_half_precision_keeps_the_dtype_and_the_references_accuracy(student, reference, gen, dtype):
    q, k, v = (x.to(dtype) for x in qkv(gen, B=1, H=2, T=96, hd=16))
    got = student.sliding_window.banded_attention(q, k, v, 48, block_size=16)
    exact = window64(q.double(), k.double(), v.double(), 48)
    expect(isinstance(got, torch.Tensor) and got.dtype == dtype, f"banded_attention({dtype} inputs): got "
           f"{getattr(got, 'dtype', type(got).__name__)}, expected {dtype}", "return the result in query's dtype")
    expect_tensor(got, exact.to(dtype), what=f"banded_attention({dtype}, T=96, window=48)", atol=2e-2, rtol=2e-2)
    own = float((reference.sliding_window.banded_attention(q, k, v, 48, block_size=16).double() - exact).abs().mean())
    err = float((got.double() - exact).abs().mean())
    expect(err <= 2 * own, f"banded_attention({dtype}): mean error {err:.3g} against float64, expected at most twice "
           f"the reference's {own:.3g}", "compute the scores, softmax and weighted sum in float32 for half inputs "
           "and cast back once at the end")


@pytest.mark.points(0.5)
def test_banded_follows_the_input_device(student, gen):
    q, k, v = qkv(gen, B=1, H=2, T=11, hd=4)
    expect_call(lambda: student.sliding_window.banded_attention(q, k, v, 3, block_size=4), window64(q, k, v, 3),
                what="banded_attention(T=11, window=3, block_size=4)", hint=BAND_HINT,
                suspects=banded_suspects(q, k, v, 3, 4))
    expect_on_input_device(lambda: student.sliding_window.banded_attention.on_meta(q, k, v, 3, block_size=4),
                           what="banded_attention(q, k, v on the meta device)")


@pytest.mark.points(0.5)
def test_banded_refuses_a_window_below_one(student, gen):
    q, k, v = qkv(gen, B=1, H=1, T=6, hd=4)
    expect_call(lambda: student.sliding_window.banded_attention(q, k, v, 2, block_size=4), window64(q, k, v, 2),
                what="banded_attention(T=6, window=2)", hint=BAND_HINT, suspects=banded_suspects(q, k, v, 2, 4))
    for window in (0, -1):
        expect_refused(lambda w=window: student.sliding_window.banded_attention(q, k, v, w),
                       f"banded_attention(..., window={window})", "raise ValueError for window < 1")


@pytest.mark.severe(OVERFLOW)
@pytest.mark.points(0.5)
def test_banded_is_stable_for_large_scores(student, gen):
    q, k, v = qkv(gen, B=1, H=2, T=20, hd=16)
    q0, k0 = q, k
    q, k = shifted_qk(q, k)  # every score ~150, the softmax unsaturated: a wrong scale shows on every draw
    banded = student.sliding_window.banded_attention
    got = expect_stable(lambda: banded(q, k, v, 7, block_size=6), lambda: banded(q0, k0, v, 7, block_size=6),
                        what="banded_attention(scores ~150)")
    expect_tensor(got, window64(q, k, v, 7), what="banded_attention(scores ~150)", atol=1e-4, rtol=1e-4,
                  suspects=banded_suspects(q, k, v, 7, 6))


# ---------------------------------------------------------------------------------------------- RollingKVCache
def cache_of(student, B: int, H: int, window: int, hd: int, meta: bool = False, **kwargs):
    """A RollingKVCache handle, or with ``meta`` the description of one built there."""
    make = student.sliding_window.RollingKVCache
    return (make.on_meta if meta else make)(B, H, window, hd, **kwargs)


@pytest.mark.points(0.75)
def test_cache_buffers_hold_exactly_the_window(student, gen):
    cache = cache_of(student, 2, 3, 4, 5, dtype=torch.float64)
    buffers = cache.named_buffers()
    for name in ("k_cache", "v_cache"):
        expect(name in buffers, f"named_buffers(): got {sorted(buffers)}, expected a {name!r} entry",
               f"self.register_buffer('{name}', torch.zeros(batch_size, num_heads, window, head_dim, dtype=dtype))")
        expect_shape(buffers[name], (2, 3, 4, 5), what=f"buffer {name}", hint="(batch_size, num_heads, window, head_dim)",
                     suspects=buffer_suspects((2, 3, 4, 5)), expected=torch.zeros(2, 3, 4, 5, dtype=torch.float64))
        expect(buffers[name].dtype == torch.float64, f"buffer {name}: got {buffers[name].dtype}, expected torch.float64",
               "allocate the storage with the dtype you were given")
    extra = sum(t.numel() for t in buffers.values()) - 2 * 2 * 3 * 4 * 5
    expect(extra <= 16, f"the buffers hold {extra} elements beyond the two (2, 3, 4, 5) windows, expected none",
           "a rolling cache is bounded by the window: no growing storage")
    expect(not cache.named_parameters(), "RollingKVCache has parameters, expected none", "storage is a buffer")
    k = torch.randn(2, 3, 1, 5, generator=gen, dtype=torch.float64)
    k_all, v_all = cache.invoke("update", k, -k)
    expect_tensor(k_all, k, what="update(k, v) on an empty cache: keys", hint=RING_HINT,
                  suspects=held_suspects(k, 4, [1]))
    expect_tensor(v_all, -k, what="update(k, v) on an empty cache: values", hint=RING_HINT)


@pytest.mark.points(1)
def test_update_returns_the_last_window_tokens_oldest_first(student, gen):
    window, n = 4, 14  # wraps around the ring three times
    cache = cache_of(student, 2, 2, window, 3)
    ks = torch.randn(2, 2, n, 3, generator=gen)
    vs = torch.randn(2, 2, n, 3, generator=gen)
    for t in range(n):
        k_all, v_all = cache.invoke("update", ks[..., t:t + 1, :], vs[..., t:t + 1, :])
        lo = max(0, t + 1 - window)
        expect_tensor(k_all, ks[..., lo:t + 1, :], what=f"keys returned by update after token {t} (window={window})",
                      hint=RING_HINT, suspects=held_suspects(ks, window, [1] * (t + 1)))
        expect_tensor(v_all, vs[..., lo:t + 1, :], what=f"values returned by update after token {t}", hint=RING_HINT)
    k_held, _ = cache.invoke("held")
    expect_tensor(k_held, ks[..., n - window:, :], what="held() after 14 tokens", hint=RING_HINT)


@pytest.mark.points(0.75)
def test_update_with_chunks_keeps_only_the_last_window(student, gen):
    window = 4
    cache = cache_of(student, 1, 2, window, 3)
    ks = torch.randn(1, 2, 16, 3, generator=gen)
    seen, fed = 0, []
    for t in (2, 7, 3, 1, 3):  # 7 > window: only its last 4 tokens survive
        k_all, v_all = cache.invoke("update", ks[..., seen:seen + t, :], 2 * ks[..., seen:seen + t, :])
        seen, fed = seen + t, [*fed, t]
        lo = max(0, seen - window)
        expect_tensor(k_all, ks[..., lo:seen, :], what=f"keys after updates totalling {seen} tokens (chunk of {t})",
                      hint=RING_HINT, suspects=held_suspects(ks, window, fed))
        expect_tensor(v_all, 2 * ks[..., lo:seen, :], what=f"values after {seen} tokens", hint=RING_HINT)


def decode(cache, q, k, v, chunks) -> torch.Tensor:
    outs, at = [], 0
    for t in chunks:
        outs.append(cache(q[..., at:at + t, :], k[..., at:at + t, :], v[..., at:at + t, :]))
        at += t
    return torch.cat(outs, dim=-2)


@pytest.mark.points(1.5)
def test_decoding_token_by_token_equals_sliding_window_attention(student, gen):
    T, window = 23, 5
    q, k, v = qkv(gen, B=2, H=2, T=T, hd=8)
    cache = cache_of(student, 2, 2, window, 8)
    got = decode(cache, q, k, v, [1] * T)
    expect_tensor(got, sdpa_math(q, k, v, attn_mask=keep_mask(T, T, window)),
                  what=f"decoding {T} tokens one at a time with RollingKVCache(window={window})",
                  hint="see RollingKVCache.forward's docstring", suspects=decode_suspects(q, k, v, window, [1] * T))
    k_held, v_held = cache.invoke("held")
    expect_tensor(k_held, k[..., T - window:, :], what="held() keys after decoding", hint="forward caches k, v too")
    expect_tensor(v_held, v[..., T - window:, :], what="held() values after decoding", hint="forward caches k, v too")


@pytest.mark.points(0.25)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_decoding_in_half_precision_keeps_query_dtype(student, gen, dtype):
    """forward's docstring: the output is (B, H, t, head_dim) in q's dtype (a float32 softmax inside is fine)."""
    T, window = 11, 4
    q, k, v = (x.to(dtype) for x in qkv(gen, B=1, H=2, T=T, hd=8))
    got = decode(cache_of(student, 1, 2, window, 8, dtype=dtype), q, k, v, [3, 1, 4, 3])
    expect(isinstance(got, torch.Tensor) and got.dtype == dtype,
           f"decoding {dtype} chunks with RollingKVCache(dtype={dtype}): got "
           f"{getattr(got, 'dtype', type(got).__name__)}, expected {dtype}\n  "
           + tag("dtype-ignored", "the output is not in q's dtype: cast the result back (out.to(q.dtype))"))
    q64, k64, v64 = (x.double() for x in (q, k, v))
    expect_tensor(got, window64(q64, k64, v64, window).to(dtype), what=f"decoding {dtype} chunks (window={window})",
                  atol=2e-2, rtol=2e-2, suspects=decode_suspects(q64, k64, v64, window, [3, 1, 4, 3]))


@pytest.mark.points(1)
def test_decoding_in_chunks_equals_sliding_window_attention(student, gen):
    T, window = 23, 5
    q, k, v = qkv(gen, B=1, H=3, T=T, hd=4, dtype=torch.float64)
    chunks = [4, 1, 6, 2, 7, 3]
    got = decode(cache_of(student, 1, 3, window, 4, dtype=torch.float64), q, k, v, chunks)
    expect_tensor(got, window64(q, k, v, window), what="decoding chunks of 4, 1, 6, 2, 7, 3 tokens (window=5, float64)",
                  hint="see RollingKVCache.forward's docstring", suspects=decode_suspects(q, k, v, window, chunks))


@pytest.mark.points(0.25)
@pytest.mark.parametrize("window", [1, 30])
def test_decoding_with_window_one_or_longer_than_the_sequence(student, gen, window):
    T = 9
    q, k, v = qkv(gen, B=1, H=2, T=T, hd=4, dtype=torch.float64)
    got = decode(cache_of(student, 1, 2, window, 4, dtype=torch.float64), q, k, v, [2, 1, 4, 2])
    expected = v if window == 1 else sdpa_math(q, k, v, is_causal=True)
    expect_tensor(got, expected, what=f"decoding with window={window}, T={T}",
                  hint="window = 1 gives v; a window longer than the sequence is causal attention",
                  suspects=decode_suspects(q, k, v, window, [2, 1, 4, 2]))


@pytest.mark.points(0.75)
def test_reset_starts_a_new_sequence(student, gen):
    window = 3
    cache = cache_of(student, 1, 2, window, 4)
    q, k, v = qkv(gen, B=1, H=2, T=7, hd=4)
    decode(cache, *(x * 3 for x in (q, k, v)), [1] * 7)
    cache.invoke("reset")
    got = decode(cache, q, k, v, [1, 1, 1])  # a short sequence: old slots would still be visible
    expect_tensor(got, sdpa_math(q[..., :3, :], k[..., :3, :], v[..., :3, :], attn_mask=keep_mask(3, 3, window)),
                  what="decoding 3 tokens after reset()", hint="see RollingKVCache.reset's docstring",
                  suspects=reset_suspects(q[..., :3, :], k[..., :3, :], v[..., :3, :], window, [1, 1, 1]))
    k_held, _ = cache.invoke("held")
    expect_tensor(k_held, k[..., :3, :], what="held() after reset and 3 tokens", hint=RING_HINT)


@pytest.mark.points(0.5)
def test_cache_moved_to_float64_decodes_in_float64(student, gen):
    cache = cache_of(student, 1, 2, 4, 4).to(dtype=torch.float64)
    q, k, v = qkv(gen, B=1, H=2, T=10, hd=4, dtype=torch.float64)
    got = decode(cache, q, k, v, [3, 1, 1, 5])
    expect_tensor(got, window64(q, k, v, 4), what="decoding with a cache moved to float64 by .to(dtype=torch.float64)",
                  hint="keep the storage in registered buffers, so .to() converts it")


@pytest.mark.points(0.5)
def test_cache_follows_the_device_of_its_buffers(student, gen):
    cache = cache_of(student, 1, 2, 3, 4)
    q, k, v = qkv(gen, B=1, H=2, T=5, hd=4)
    expect_tensor(decode(cache, q, k, v, [2, 3]), window64(q, k, v, 3), what="decoding 5 tokens (window=3)")
    expect_on_input_device(lambda: cache.on_meta(q[..., :2, :], k[..., :2, :], v[..., :2, :]),
                           what="RollingKVCache forward on the meta device",
                           hint="make positions and slot indices on the buffers' device: torch.arange(..., "
                                "device=self.k_cache.device)")
    full = ((1, 2, 3, 4), "torch.float64")
    expect_built_on_meta(cache_of(student, 1, 2, 3, 4, dtype=torch.float64, device="meta", meta=True),
                         what="RollingKVCache(1, 2, 3, 4, dtype=torch.float64, device='meta')",
                         buffers={"k_cache": full, "v_cache": full})


@pytest.mark.points(0.5)
def test_cache_refuses_a_window_below_one(student, gen):
    q, k, v = qkv(gen, B=1, H=1, T=2, hd=4)
    expect_tensor(decode(cache_of(student, 1, 1, 1, 4), q, k, v, [1, 1]), v, what="decoding with window=1",
                  hint="window = 1: each token sees only itself")
    for window in (0, -4):
        expect_refused(lambda w=window: cache_of(student, 1, 1, w, 4), f"RollingKVCache(1, 1, window={window}, 4)",
                       "raise ValueError for window < 1 in __init__")


# ---------------------------------------------------------------------------------------------- CUDA (extra)
@pytest.mark.cuda
@pytest.mark.points(0.5)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_cuda_banded_half_precision_is_as_accurate_as_the_fused_kernel(student, gen, dtype):
    T, window = 1024, 128
    q, k, v = (torch.randn(2, 4, T, 64, generator=gen).to(device="cuda", dtype=dtype) for _ in range(3))
    got = student.sliding_window.banded_attention(q, k, v, window, block_size=64)
    keep = keep_mask(T, T, window).cuda()
    with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):  # a fused kernel that takes a mask, in the inputs' dtype
        kernel = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    truth = hand_attention(q.double(), k.double(), v.double(), keep)
    # a sandboxed reply arrives on the CPU: compare there
    expect_no_worse_than(got.cpu(), kernel.cpu(), truth.cpu(), what=f"banded_attention on CUDA ({dtype}, T={T}, window={window})",
                         hint="compute in float32 for half inputs and cast back once; make masks on query.device")


@pytest.mark.cuda
@pytest.mark.points(0.5)
def test_cuda_rolling_cache_decodes_on_the_gpu(student, gen):
    T, window = 40, 8
    q, k, v = (torch.randn(2, 4, T, 32, generator=gen).cuda() for _ in range(3))
    cache = cache_of(student, 2, 4, window, 32, device="cuda")
    got = decode(cache, q, k, v, [5, 1, 1, 9, 24])
    expect_tensor(got.cpu(), sdpa_math(q, k, v, attn_mask=keep_mask(T, T, window).cuda()).cpu(), atol=1e-4, rtol=1e-4,
                  what="decoding on CUDA with RollingKVCache(device='cuda')",
                  hint="positions, slots and masks on the cache's device (torch.arange(..., device=...))")
