"""Hidden tests for `efficient_attention`: SDPA masks, causal, dropout; FlashAttention values, tiles, memory."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from grader.testing.attention import sdpa_fused, sdpa_math
from grader.testing.catalogue.efficient import sdpa_suspects
from grader.testing.catalogue.flash import flash_suspects
from grader.testing.checks import expect, expect_call, expect_tensor
from grader.testing.devices import expect_on_input_device
from grader.testing.diagnosis import tag
from grader.testing.dropout import expect_new_draw
from grader.testing.gradients import expect_grads
from grader.testing.layouts import shared, sliced, transposed
from grader.testing.oracles import expect_dropout_on_weights, expect_repeatable
from grader.testing.precision import expect_no_worse_than
from grader.testing.regimes import expect_stable, shifted_qk

pytestmark = pytest.mark.exercise("efficient_attention")

OVERFLOW = "outputs become inf or NaN for inputs of ordinary size (a softmax without the max subtracted)"
UNDERFLOW = ("outputs become inf or NaN for scores of ordinary size (a running max started at 0 instead of -inf, "
             "or none subtracted)")


MAX_AT_ZERO = tag("flash-max-init", "it underflows: the running max starts at 0, so exp(score - 0) is 0 for scores far "
                  "below 0 and the output is 0 / 0; start it at -inf")
FULL_MATRIX = tag("memory-full-matrix", "a tensor as large as the whole score matrix was made: work one "
                  "(L, block_size) tile of scores at a time")


def hand_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """float64 softmax(q k^T / sqrt(E) [+ mask]) v, cast to q's dtype. Bool mask: True = may attend.

    Rows with no allowed key give 0, as SDPA does.
    """
    scores = q.double() @ k.double().transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None and mask.dtype == torch.bool:
        scores = scores.masked_fill(~mask, float("-inf"))
    elif mask is not None:
        scores = scores + mask.double()
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # an all -inf row: NaN -> 0
    return (weights @ v.double()).to(q.dtype)


def qkv(gen: torch.Generator, B: int, H: int, L: int, S: int, E: int, Ev: int, dtype=torch.float32):
    return (torch.randn(B, H, L, E, generator=gen, dtype=dtype), torch.randn(B, H, S, E, generator=gen, dtype=dtype),
            torch.randn(B, H, S, Ev, generator=gen, dtype=dtype))


def bottom_right(L: int, S: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """torch.nn.attention.bias.causal_lower_right(L, S) as a bool mask (importing that module imports torch's
    compiler: over a second in every grade)."""
    return torch.ones(L, S, dtype=torch.bool, device=device).tril(diagonal=S - L)  # (L, S): query i sees keys 0..S-L+i


# ---------------------------------------------------------------------------------------------- sdpa_attention
@pytest.mark.points(0.75)
def test_sdpa_bool_padding_mask_matches_math_backend_and_float64(student, gen):
    q, k, v = qkv(gen, B=2, H=2, L=4, S=7, E=8, Ev=5)
    keep = torch.rand(2, 1, 1, 7, generator=gen) > 0.4  # (B, 1, 1, S): per-batch padding, True = real key
    keep[..., 0] = True  # every row keeps at least one key
    got = expect_call(lambda: student.efficient_attention.sdpa_attention(q, k, v, mask=keep),
                      sdpa_math(q, k, v, attn_mask=keep), what="sdpa_attention(q, k, v, mask=bool (B, 1, 1, S))",
                      suspects=sdpa_suspects(q, k, v, mask=keep))
    expect_tensor(got, hand_attention(q, k, v, keep), what="sdpa_attention with a bool mask vs float64")
    k2, v2 = k.clone(), v.clone()
    k2 += 7.0 * (~keep).transpose(-2, -1)  # move only the padded keys and values
    v2 -= 7.0 * (~keep).transpose(-2, -1)
    again = student.efficient_attention.sdpa_attention(q, k2, v2, mask=keep)
    expect_tensor(again, got, what="output after changing only the masked (False) keys and values")


@pytest.mark.points(0.75)
def test_sdpa_additive_float_mask_is_added_to_the_scores(student, gen):
    q, k, v = qkv(gen, B=2, H=2, L=5, S=6, E=4, Ev=4)
    blocked = torch.rand(5, 6, generator=gen) > 0.6
    blocked[:, 2] = False
    additive = torch.zeros(5, 6).masked_fill(blocked, float("-inf"))  # 0 = keep, -inf = block
    additive += 0.5 * torch.randn(5, 6, generator=gen) * (~blocked)  # a real bias on the kept entries
    expect_call(lambda: student.efficient_attention.sdpa_attention(q, k, v, mask=additive),
                hand_attention(q, k, v, additive), what="sdpa_attention(..., mask=additive float mask)",
                suspects=sdpa_suspects(q, k, v, mask=additive))


@pytest.mark.points(0.25)
def test_sdpa_is_causal_square_matches_math_and_hides_the_future(student, gen):
    q, k, v = qkv(gen, B=2, H=3, L=8, S=8, E=4, Ev=6)
    got = expect_call(lambda: student.efficient_attention.sdpa_attention(q, k, v, is_causal=True),
                      sdpa_math(q, k, v, is_causal=True), what="sdpa_attention(..., is_causal=True), L == S",
                      suspects=sdpa_suspects(q, k, v, is_causal=True))
    k2, v2 = k.clone(), v.clone()
    k2[..., 5:, :] = torch.randn(2, 3, 3, 4, generator=gen) * 5
    v2[..., 5:, :] = torch.randn(2, 3, 3, 6, generator=gen) * 5
    again = student.efficient_attention.sdpa_attention(q, k2, v2, is_causal=True)
    expect_tensor(again[..., :5, :], got[..., :5, :], what="outputs of queries 0..4 after changing keys 5..7")


@pytest.mark.points(0.75)
def test_sdpa_is_causal_with_fewer_queries_is_bottom_right_aligned(student, gen):
    q, k, v = qkv(gen, B=2, H=2, L=3, S=7, E=4, Ev=4)
    got = expect_call(lambda: student.efficient_attention.sdpa_attention(q, k, v, is_causal=True),
                      sdpa_math(q, k, v, attn_mask=bottom_right(3, 7)), suspects=sdpa_suspects(q, k, v, is_causal=True),
                      what="sdpa_attention(q (L=3), k (S=7), is_causal=True) vs a bottom-right causal mask")
    expect_tensor(got, hand_attention(q, k, v, bottom_right(3, 7)), what="the same vs float64")
    k2, v2 = k.clone(), v.clone()
    k2[..., 6, :] += 9.0  # the last key is visible to the last query only
    v2[..., 6, :] += 9.0
    again = student.efficient_attention.sdpa_attention(q, k2, v2, is_causal=True)
    expect_tensor(again[..., :2, :], got[..., :2, :], what="queries 0..1 after changing the last key")
    expect_on_input_device(lambda: student.efficient_attention.sdpa_attention.on_meta(q, k, v, is_causal=True),
                           what="sdpa_attention(q, k, v on the meta device, is_causal=True)")


@pytest.mark.points(0.5)
def test_sdpa_eval_mode_has_no_dropout(student, gen):
    q, k, v = qkv(gen, B=2, H=2, L=6, S=6, E=4, Ev=4)
    a = student.efficient_attention.sdpa_attention(q, k, v, dropout_p=0.5, training=False)
    b = student.efficient_attention.sdpa_attention(q, k, v, dropout_p=0.5, training=False)
    expect_repeatable(a, b, what="two calls of sdpa_attention(..., dropout_p=0.5, training=False)")
    expect_tensor(a, hand_attention(q, k, v), what="sdpa_attention(..., dropout_p=0.5, training=False)",
                  suspects=sdpa_suspects(q, k, v))


@pytest.mark.points(0.5)
@pytest.mark.parametrize("branch", ["bool mask", "is_causal, L < S"])
def test_sdpa_training_mode_drops_weights_with_a_mask_or_causal(student, gen, branch):
    """Every branch drops in training: with a mask, and with the bottom-right causal mask (L != S) built by hand."""
    p, L, S = 0.3, 12, 16
    q, k = (torch.randn(3, 2, n, 8, generator=gen, dtype=torch.float64) * 0.5 for n in (L, S))
    v = torch.randn(3, 2, S, 40, generator=gen, dtype=torch.float64)  # Ev > S: the value rows are independent
    allowed = bottom_right(L, S) if branch != "bool mask" else torch.rand(L, S, generator=gen) < 0.7
    allowed[:, 0] = True  # every query sees a key
    kwargs = {"is_causal": True} if branch != "bool mask" else {"mask": allowed}
    weights = torch.softmax((q @ k.transpose(-2, -1) / math.sqrt(8)).masked_fill(~allowed, float("-inf")), dim=-1)
    call = student.efficient_attention.sdpa_attention
    expect_tensor(call(q, k, v, dropout_p=p, training=False, **kwargs), hand_attention(q, k, v, allowed),
                  what=f"sdpa_attention(..., {branch}, dropout_p={p}, training=False)")
    a, b = (call(q, k, v, dropout_p=p, training=True, **kwargs) for _ in range(2))
    said = tag("dropout-branch-skipped", "this branch never drops: pass dropout_p if training else 0.0 in every "
               "branch's call")
    expect(not torch.allclose(a, hand_attention(q, k, v, allowed)), f"sdpa_attention(..., {branch}, dropout_p={p}, "
           f"training=True): got the output without dropout, expected about {p:.0%} of the weights dropped\n  "
           + said)
    expect_new_draw(a, b, what=f"sdpa_attention(..., {branch}, dropout_p={p}, training=True)")
    expect_dropout_on_weights(a, weights, v, p, what=f"sdpa_attention(..., {branch}, dropout_p={p}, training=True)")


@pytest.mark.points(0.25)
@pytest.mark.parametrize("p", [0.1, 0.3])  # not 0.5 alone: there p == 1 - p, so passing 1 - p would pass
def test_sdpa_training_mode_drops_a_fraction_p_of_the_weights(student, gen, p):
    L = S = 32
    q = torch.randn(2, 2, L, 8, generator=gen) * 0.5
    k = torch.randn(2, 2, S, 8, generator=gen) * 0.5
    v = torch.randn(2, 2, S, 64, generator=gen)  # Ev = 2 S: the value rows are independent, well-conditioned
    weights = torch.softmax(q.double() @ k.double().transpose(-2, -1) / math.sqrt(8), dim=-1)
    a = student.efficient_attention.sdpa_attention(q, k, v, dropout_p=p, training=True)
    b = student.efficient_attention.sdpa_attention(q, k, v, dropout_p=p, training=True)
    expect(not torch.equal(a, b), f"two calls with dropout_p={p}, training=True gave identical outputs")
    expect_dropout_on_weights(a, weights, v, p, what=f"sdpa_attention(..., dropout_p={p}, training=True)", tol=1e-4)


# ---------------------------------------------------------------------------------------------- flash_attention
@pytest.mark.points(0.25)
def test_flash_matches_sdpa_math_in_float32(student, gen):
    q, k, v = qkv(gen, B=2, H=2, L=37, S=37, E=8, Ev=8)
    expect_call(lambda: student.efficient_attention.flash_attention(q, k, v, block_size=8), sdpa_math(q, k, v),
                what="flash_attention(B=2, H=2, L=S=37, E=8, block_size=8)", atol=1e-5,
                suspects=flash_suspects(q, k, v, block_size=8, causal_default=True))


@pytest.mark.points(0.5)
@pytest.mark.parametrize("is_causal", [False, True])
def test_flash_matches_float64_attention_when_lengths_differ(student, gen, is_causal):
    q, k, v = qkv(gen, B=2, H=2, L=6, S=13, E=5, Ev=3, dtype=torch.float64)
    mask = bottom_right(6, 13) if is_causal else None
    expect_call(lambda: student.efficient_attention.flash_attention(q, k, v, is_causal=is_causal, block_size=4),
                hand_attention(q, k, v, mask), suspects=flash_suspects(q, k, v, is_causal=is_causal, block_size=4),
                what=f"flash_attention(float64, L=6, S=13, E=5, Ev=3, is_causal={is_causal}, block_size=4)")


@pytest.mark.points(0.25)
@pytest.mark.parametrize("block_size", [1, 5, 8, 64])
def test_flash_is_tile_size_invariant_with_a_ragged_last_tile(student, gen, block_size):
    q, k, v = qkv(gen, B=1, H=2, L=37, S=37, E=4, Ev=4, dtype=torch.float64)
    expect_call(lambda: student.efficient_attention.flash_attention(q, k, v, block_size=block_size),
                hand_attention(q, k, v), what=f"flash_attention(L=S=37, block_size={block_size})",
                suspects=flash_suspects(q, k, v, block_size=block_size, causal_default=True))


@pytest.mark.points(1)
def test_flash_causal_with_fewer_queries_is_bottom_right_aligned(student, gen):
    q, k, v = qkv(gen, B=2, H=2, L=5, S=13, E=4, Ev=4)
    expect_call(lambda: student.efficient_attention.flash_attention(q, k, v, is_causal=True, block_size=4),
                sdpa_math(q, k, v, attn_mask=bottom_right(5, 13)), suspects=flash_suspects(
                    q, k, v, is_causal=True, block_size=4),
                what="flash_attention(L=5, S=13, is_causal=True) vs SDPA with a bottom-right causal mask")
    expect_on_input_device(lambda: student.efficient_attention.flash_attention.on_meta(q, k, v, is_causal=True, block_size=4),
                           what="flash_attention(q, k, v on the meta device, is_causal=True)")


@pytest.mark.points(0.5)
def test_flash_causal_rows_without_any_key_are_zero_not_nan(student, gen):
    q, k, v = qkv(gen, B=1, H=2, L=7, S=4, E=4, Ev=4, dtype=torch.float64)
    # scores that climb by 2 a key in head 0 (the second tile raises the running max: a missing rescale shows on
    # every draw, not only on those where the random part happens to) and fall by 2 in head 1 (the max stays put)
    q[..., -1], k[..., -1] = 1.0, torch.arange(4, dtype=torch.float64) * 4 * torch.tensor([[1.0], [-1.0]])
    expect_call(lambda: student.efficient_attention.flash_attention(q, k, v, is_causal=True, block_size=2),
                hand_attention(q, k, v, bottom_right(7, 4)), what="flash_attention(L=7, S=4, is_causal=True)",
                suspects=flash_suspects(q, k, v, is_causal=True, block_size=2))


@pytest.mark.severe(UNDERFLOW)
@pytest.mark.points(0.5)
@pytest.mark.parametrize("case", ["scores_near_150", "scores_near_minus_1000"])
def test_flash_is_stable_for_large_scores(student, gen, case):
    # a constant shift of every score: the softmax stays unsaturated, so a wrong scale shows on every draw
    if case == "scores_near_150":  # float32 scores ~150: exp overflows unless the running max is subtracted
        q, k, v = qkv(gen, B=1, H=2, L=20, S=20, E=16, Ev=4)
        ordinary = q, k
        q, k = shifted_qk(q, k)
        tol = 1e-4  # float32 rounding of scores ~150 moves the weights by ~1e-5
    else:  # every score ~-1000: exp(score) underflows, even in float64, unless the running max starts at -inf
        q, k, v = qkv(gen, B=1, H=2, L=20, S=20, E=16, Ev=4, dtype=torch.float64)
        ordinary = q, k
        q, k = shifted_qk(q, k, -1000.0)
        tol = 1e-8
    flash, (q0, k0) = student.efficient_attention.flash_attention, ordinary
    got = expect_stable(lambda: flash(q, k, v, block_size=6), lambda: flash(q0, k0, v, block_size=6),
                        what=f"flash_attention({case})", names=None if case == "scores_near_150" else MAX_AT_ZERO)
    expect_tensor(got, hand_attention(q, k, v), what=f"flash_attention({case})", atol=tol, rtol=tol,
                  suspects=flash_suspects(q, k, v, block_size=6, causal_default=True))


@pytest.mark.points(0.25)
@pytest.mark.parametrize("fn", ["flash_attention", "sdpa_attention"])
def test_views_and_one_tensor_as_query_key_and_value(student, gen, fn):
    """Inputs as attention gets them in a model: heads split by x.view(B, L, H, E).transpose(1, 2) (not contiguous),
    a value sliced out of a wider tensor, and self-attention with one tensor passed as query, key and value."""
    call = getattr(student.efficient_attention, fn)
    kwargs = {"block_size": 4} if fn == "flash_attention" else {}
    q, k, v = qkv(gen, B=2, H=3, L=7, S=9, E=4, Ev=5, dtype=torch.float64)
    expect_tensor(call(transposed(q, 1, 2), transposed(k, 1, 2), sliced(v), is_causal=True, **kwargs),
                  hand_attention(q, k, v, bottom_right(7, 9)),
                  what=f"{fn}(q, k, v, is_causal=True) with q and k transposed views and v a slice")
    x = q[:, :, :, :4]
    expect_tensor(call(shared(x), shared(x), shared(x), **kwargs), hand_attention(x, x, x),
                  what=f"{fn}(x, x, x): one tensor as query, key and value")


@pytest.mark.points(0.25)
def test_flash_output_lies_between_the_value_extremes(student, gen):
    q, k, v = qkv(gen, B=2, H=1, L=16, S=23, E=8, Ev=6)
    q = q * 3
    got = student.efficient_attention.flash_attention(q, k, v, is_causal=True, block_size=5)
    lo = v.amin(dim=-2, keepdim=True) - 1e-5  # (B, H, 1, Ev)
    hi = v.amax(dim=-2, keepdim=True) + 1e-5
    inside = bool(((got >= lo) & (got <= hi)).all())
    # any average of the values (zeros, a mean over keys) lies inside too: the values decide
    expect_tensor(got, hand_attention(q, k, v, bottom_right(16, 23)), what="flash_attention(L=16, S=23, "
                  "is_causal=True, block_size=5)", suspects=flash_suspects(q, k, v, is_causal=True, block_size=5))
    expect(inside, "some output lies outside [min V, max V] of its column: the tile weights no longer sum to 1")


@pytest.mark.points(0.75)
def test_flash_never_materialises_the_score_matrix(student, gen):
    L = S = 4096  # the full float32 score matrix is 64 MiB, one (L, 64) tile 1 MiB
    q, k, v = qkv(gen, B=1, H=1, L=L, S=S, E=16, Ev=16)
    got, stats = student.efficient_attention.flash_attention.measure(q, k, v, block_size=64)
    expect_tensor(got, sdpa_fused(q, k, v), what=f"flash_attention(L=S={L}, E=16, block_size=64)")
    full = L * S * 4
    # the worker's own figure (a dispatch mode) sees a big tensor even in a buffer allocated beforehand
    expect(stats["max_tensor_bytes"] < full // 4,
           f"the largest tensor made during flash_attention had {stats['max_tensor_bytes']:.0f} bytes, expected "
           f"below {full // 4} (the full {L} x {S} float32 score matrix has {full})\n  {FULL_MATRIX}")
    # the sandbox's memory cgroup, read by the grader outside the worker: student code cannot switch it off.
    # A tiled pass adds at most ~16 MiB there (allocator and first-call noise), the full matrix >= 64 MiB.
    # Without a cgroup (student laptops) only the figure above is checked; the scorecard's
    # isolation.memory_figure says which.
    outside = stats.get("max_memory_bytes")
    expect(outside is None or outside < full // 2,
           f"the sandbox's memory grew by {outside or 0:.0f} bytes during flash_attention, expected below "
           f"{full // 2} (the full {L} x {S} float32 score matrix has {full})\n  {FULL_MATRIX}")


# ---------------------------------------------------------------------------------------------- CUDA (extra)
# half precision: the error against float64 is bounded by the flash kernel's own (grader/testing/precision.py)


def cuda_qkv(gen: torch.Generator, L: int, dtype: torch.dtype):
    return tuple(torch.randn(2, 4, L, 64, generator=gen).to(device="cuda", dtype=dtype) for _ in range(3))


def flash_kernel(q, k, v, is_causal: bool) -> torch.Tensor:
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)


@pytest.mark.cuda
@pytest.mark.points(0.5)
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("L", [128, 1024])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_cuda_flash_attention_matches_the_flash_kernel(student, gen, dtype, L, is_causal):
    q, k, v = cuda_qkv(gen, L, dtype)
    got = student.efficient_attention.flash_attention(q, k, v, is_causal=is_causal, block_size=64)
    expect_no_worse_than(got, flash_kernel(q, k, v, is_causal), _attention64(q.double(), k.double(), v.double(),
                                                                             is_causal),
                         what=f"flash_attention on CUDA ({dtype}, L={L}, causal={is_causal})")


@pytest.mark.cuda
@pytest.mark.points(0.5)
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("L", [128, 1024])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_cuda_sdpa_attention_matches_the_flash_kernel(student, gen, dtype, L, is_causal):
    q, k, v = cuda_qkv(gen, L, dtype)
    got = student.efficient_attention.sdpa_attention(q, k, v, is_causal=is_causal)
    expect_no_worse_than(got, flash_kernel(q, k, v, is_causal), _attention64(q.double(), k.double(), v.double(),
                                                                             is_causal),
                         what=f"sdpa_attention on CUDA ({dtype}, L={L}, causal={is_causal})")


def _attention64(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False,
                 block_size: int = 64) -> torch.Tensor:
    """Differentiable float64 softmax(q k^T / sqrt(E)) v, bottom-right causal (every row sees a key here)."""
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if is_causal:
        s = s.masked_fill(~bottom_right(q.shape[-2], k.shape[-2], s.device), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


@pytest.mark.points(0.5)
def test_flash_float64_gradients_match_the_oracle(student, gen):
    q, k, v = qkv(gen, B=1, H=2, L=6, S=11, E=4, Ev=3, dtype=torch.float64)
    g = torch.randn(1, 2, 6, 3, generator=gen, dtype=torch.float64)
    expect_grads(student.efficient_attention.flash_attention, (q, k, v), _attention64, g,
                 what="flash_attention(float64, L=6, S=11, is_causal=True, block_size=4) backward",
                 names=("query", "key", "value"), is_causal=True, block_size=4)


@pytest.mark.points(0.25)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bfloat16", "float16"])
def test_flash_half_precision_error_is_the_references(student, reference, gen, dtype):
    """Half inputs, 16 tiles: the mean error against float64 may be at most twice the reference's own (which
    accumulates in float32); accumulating in half precision is 4.2-6 times worse (20 draws measured)."""
    q = torch.randn(1, 2, 16, 16, generator=gen).to(dtype)
    k, v = (torch.randn(1, 2, 128, 16, generator=gen).to(dtype) for _ in range(2))
    got = student.efficient_attention.flash_attention(q, k, v, block_size=8)
    exact = hand_attention(q.double(), k.double(), v.double())
    expect(isinstance(got, torch.Tensor) and got.dtype == dtype, f"flash_attention({dtype} inputs): got "
           f"{getattr(got, 'dtype', type(got).__name__)}, expected {dtype}")
    expect_tensor(got, exact.to(dtype), what=f"flash_attention({dtype}, S=128, block_size=8)", atol=2e-2, rtol=2e-2)
    own = float((reference.efficient_attention.flash_attention(q, k, v, block_size=8).double() - exact).abs().mean())
    err = float((got.double() - exact).abs().mean())
    expect(err <= 2 * own, f"flash_attention({dtype}): got a mean error of {err:.3g} against a float64 computation, "
           f"expected at most twice the reference implementation's {own:.3g}\n  " + tag(
               "precision-lowered", f"{err / own:.1f} times the error of an implementation that accumulates in float32: "
               "the running max, denominator and output are kept in half precision"))


@pytest.mark.points(0.25)
def test_both_take_any_number_of_leading_dims(student, gen):
    """The module's shapes are (..., L, E): (B, L, E) without heads and (B, G, H, L, E) too, not only (B, H, L, E)."""
    for lead in [(3,), (2, 2, 2)]:
        q = torch.randn(*lead, 6, 4, generator=gen, dtype=torch.float64)  # (..., L, E)
        k = torch.randn(*lead, 9, 4, generator=gen, dtype=torch.float64)  # (..., S, E)
        v = torch.randn(*lead, 9, 3, generator=gen, dtype=torch.float64)  # (..., S, Ev)
        for is_causal in (False, True):
            want = hand_attention(q, k, v, bottom_right(6, 9) if is_causal else None)
            what = f"(leading dims {lead}, L=6, S=9, is_causal={is_causal}"
            sdpa, flash = student.efficient_attention.sdpa_attention, student.efficient_attention.flash_attention
            args, c = (q, k, v), is_causal
            expect_call(lambda: sdpa(*args, is_causal=c), want, what=f"sdpa_attention{what})",  # noqa: B023
                        suspects=sdpa_suspects(q, k, v, is_causal=is_causal))
            expect_call(lambda: flash(*args, is_causal=c, block_size=4), want,  # noqa: B023
                        what=f"flash_attention{what}, block_size=4)",
                        suspects=flash_suspects(q, k, v, is_causal=is_causal, block_size=4))
