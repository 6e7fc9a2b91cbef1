"""Hidden tests for `flash_backward`: the forward's output and log-sum-exp, the hand-written backward (against float64
autograd, SDPA's gradients and a gradcheck of the student's own forward), memory in both directions (the tiled
backward alone, and FlashAttentionFunction's forward and backward together), defaults, dtypes, devices."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.autograd.gradcheck import GradcheckError  # not torch.autograd.gradcheck.X: that name is the function
from torch.nn.attention import SDPBackend, sdpa_kernel

from grader.testing.attention import sdpa_fused, sdpa_math
from grader.testing.catalogue.flash import flash_suspects
from grader.testing.catalogue.flash_backward import backward_suspects, lse_suspects
from grader.testing.checks import expect, expect_finite, expect_tensor, fail
from grader.testing.devices import expect_on_input_device
from grader.testing.diagnosis import Suspects
from grader.testing.gradients import expect_grads, oracle_grads
from grader.testing.precision import expect_no_worse_than
from grader.testing.regimes import expect_stable, shifted_qk

pytestmark = pytest.mark.exercise("flash_backward")

NAMES = ("query", "key", "value")
# Hints say where the specification is and name no mistake: a mistake is named only by a diagnosis that saw it
# (grader.testing.catalogue.flash_backward), since a broad test fails for many different ones.
LSE_HINT = "see flash_forward's docstring: what lse is"
BACKWARD_HINT = "see the module docstring: the backward's recipe, tile of keys by tile of keys"
GRAD_HINTS = {"query": BACKWARD_HINT, "key": BACKWARD_HINT, "value": BACKWARD_HINT}
OVERFLOW = "outputs or gradients become inf or NaN for inputs of ordinary size (exp without the max subtracted)"


def masked_scores(q: torch.Tensor, k: torch.Tensor, is_causal: bool) -> torch.Tensor:
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    L, S = s.shape[-2:]
    return s.masked_fill(~torch.ones(L, S, dtype=torch.bool, device=s.device).tril(S - L), float("-inf")) if is_causal else s


def attention64(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False, block_size: int = 64):
    """Differentiable softmax attention in the inputs' dtype; a row with no key (causal, L > S) gives 0 and no NaN."""
    s = masked_scores(q, k, is_causal)
    empty = torch.isinf(s).all(dim=-1, keepdim=True)  # (B, H, L, 1)
    weights = torch.softmax(s.masked_fill(empty, 0.0), dim=-1).masked_fill(empty, 0.0)
    return weights @ v


def lse64(q: torch.Tensor, k: torch.Tensor, is_causal: bool) -> torch.Tensor:
    return torch.logsumexp(masked_scores(q.double(), k.double(), is_causal), dim=-1)


def qkv(gen: torch.Generator, B: int, H: int, L: int, S: int, E: int, Ev: int, dtype=torch.float32):
    """Random q, k, v whose scores also climb across the keys in even heads and fall in odd ones.

    Both paths of the online softmax then run on every draw: a later tile raising a row's running max (rising
    heads) and tiles keeping it (falling heads). In a rising head every key outscores every earlier one in every
    row, whatever the draw: the random part of each score is held below half the ramp's step (a bound on the
    features, through tanh), so the last tile a row sees always raises its max. With only a ramp under unbounded
    noise, whether it did was luck, and a bug in that step (the log-sum-exp paired with the max before the last
    tile) failed a different set of tests on each seed. The ramp spans 6 in score units whatever the length: the
    weights stay spread. Falling heads keep the full random part."""
    q, k = torch.randn(B, H, L, E, generator=gen, dtype=dtype), torch.randn(B, H, S, E, generator=gen, dtype=dtype)
    if S > 1:
        rising = torch.arange(H) % 2 == 0  # (H,): True, False, True, ...
        sign = rising.double() * 2.0 - 1.0  # (H,): +1, -1, +1, ...
        ramp = torch.linspace(0.0, 6.0 * E**0.5, S, dtype=torch.float64)  # (S,): score = q_last * k_last / sqrt(E)
        q[..., -1] = 1.0
        k[..., -1] = (sign.view(H, 1) * ramp).to(dtype)  # (H, S), broadcast over B
        if E > 1:  # |q_f|, |k_f| < b: |random part| < (E - 1) b^2 / sqrt(E) = 0.4 * step, so 2 of them < one step
            b = (0.4 * (6.0 / (S - 1)) * E**0.5 / (E - 1)) ** 0.5
            q[:, rising, :, :-1] = b * torch.tanh(q[:, rising, :, :-1])  # (B, H_rising, L, E - 1)
            k[:, rising, :, :-1] = b * torch.tanh(k[:, rising, :, :-1])  # (B, H_rising, S, E - 1)
    return q, k, torch.randn(B, H, S, Ev, generator=gen, dtype=dtype)


def expect_pair(got, what: str) -> tuple[torch.Tensor, torch.Tensor]:
    __tracebackhide__ = True
    expect(isinstance(got, tuple) and len(got) == 2, f"{what}: got {type(got).__name__}, expected a tuple (out, lse)",
           "return out, lse")
    return got


# ---------------------------------------------------------------------------------------------- flash_forward
@pytest.mark.points(0.5)
@pytest.mark.parametrize("is_causal", [False, True])
def test_forward_output_matches_sdpa_math(student, gen, is_causal):
    q, k, v = qkv(gen, B=2, H=3, L=37, S=37, E=16, Ev=8)
    out, _ = expect_pair(student.flash_backward.flash_forward(q, k, v, is_causal, 8), "flash_forward")
    expect_tensor(out, sdpa_math(q, k, v, is_causal=is_causal), atol=1e-5,
                  what=f"flash_forward(L=S=37, is_causal={is_causal}, block_size=8): out",
                  hint="see flash_forward's docstring", suspects=flash_suspects(q, k, v, is_causal=is_causal, block_size=8))


@pytest.mark.points(0.75)
@pytest.mark.parametrize(("L", "S", "is_causal"), [(6, 13, False), (6, 13, True), (13, 13, True)])
def test_forward_lse_is_the_logsumexp_of_the_scaled_scores(student, gen, L, S, is_causal):
    q, k, v = qkv(gen, B=2, H=2, L=L, S=S, E=5, Ev=3, dtype=torch.float64)
    out, lse = expect_pair(student.flash_backward.flash_forward(q, k, v, is_causal, 4), "flash_forward")
    what = f"flash_forward(float64, L={L}, S={S}, is_causal={is_causal}, block_size=4)"
    expect_tensor(out, attention64(q, k, v, is_causal), what=f"{what}: out")
    expect_tensor(lse, lse64(q, k, is_causal), what=f"{what}: lse (B, H, L)", hint=LSE_HINT,
                  suspects=lse_suspects(q, k, is_causal))


@pytest.mark.points(0.25)
@pytest.mark.parametrize("block_size", [1, 5, 64])
def test_forward_is_tile_size_invariant(student, gen, block_size):
    q, k, v = qkv(gen, B=1, H=2, L=23, S=23, E=4, Ev=4, dtype=torch.float64)
    out, lse = expect_pair(student.flash_backward.flash_forward(q, k, v, True, block_size), "flash_forward")
    expect_tensor(out, attention64(q, k, v, True), what=f"flash_forward(L=S=23, causal, block_size={block_size}): out",
                  hint="see flash_forward's docstring", suspects=flash_suspects(q, k, v, is_causal=True,
                                                                                  block_size=block_size))
    expect_tensor(lse, lse64(q, k, True), what=f"flash_forward(block_size={block_size}): lse", hint=LSE_HINT,
                  suspects=lse_suspects(q, k, True))


@pytest.mark.points(0.5)
def test_forward_rows_without_keys_give_zero_and_minus_infinity(student, gen):
    q, k, v = qkv(gen, B=1, H=2, L=7, S=4, E=4, Ev=4, dtype=torch.float64)  # causal: queries 0..2 see no key
    out, lse = expect_pair(student.flash_backward.flash_forward(q, k, v, True, 2), "flash_forward")
    hint = "with L > S the first L - S queries see no key: out 0 (guard exp(-inf - -inf)), lse = -inf + log 0 = -inf"
    expect_finite(out, what="flash_forward(L=7, S=4, causal): out", hint=hint)
    expect_tensor(out, attention64(q, k, v, True), what="flash_forward(L=7, S=4, causal): out", hint=hint)
    expect_tensor(lse, lse64(q, k, True), what="flash_forward(L=7, S=4, causal): lse", hint=hint)


@pytest.mark.points(0.75)
@pytest.mark.parametrize("name", ["flash_forward", "flash_attention"])
def test_forward_never_materialises_the_score_matrix(student, gen, name):
    L = S = 4096  # the float32 scores are 64 MiB, one (L, 64) tile 1 MiB
    q, k, v = qkv(gen, B=1, H=1, L=L, S=S, E=16, Ev=16)
    got, stats = getattr(student.flash_backward, name).measure(q, k, v, False, 64)
    out = got[0] if name == "flash_forward" and isinstance(got, tuple) else got
    expect_tensor(out, sdpa_fused(q, k, v), what=f"{name}(L=S={L}, block_size=64)")
    full = L * S * 4
    hint = ("the forward keeps only O and lse: one (L, block_size) tile of scores at a time, never an (L, S) tensor; "
            "saving P or S for the backward is exactly what FlashAttention avoids")
    expect(stats["max_tensor_bytes"] < full // 4, f"the largest tensor made during {name} had "
           f"{stats['max_tensor_bytes']:.0f} bytes, expected below {full // 4} (the L x S scores have {full})", hint)
    outside = stats.get("max_memory_bytes")  # the sandbox's cgroup, read outside the worker (None without one)
    expect(outside is None or outside < full // 2, f"the sandbox's memory grew by {outside or 0:.0f} bytes during "
           f"{name}, expected below {full // 2}", hint)


@pytest.mark.points(0.25)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_forward_half_precision_keeps_dtypes_and_accuracy(student, reference, gen, dtype):
    q, k, v = (x.to(dtype) for x in qkv(gen, B=1, H=2, L=16, S=128, E=16, Ev=16))
    out, lse = expect_pair(student.flash_backward.flash_forward(q, k, v, False, 8), "flash_forward")
    expect(out.dtype == dtype and lse.dtype == torch.float32, f"flash_forward({dtype}): got out {out.dtype}, lse "
           f"{lse.dtype}, expected out {dtype} and lse torch.float32", "accumulate in float32, cast out back, keep lse")
    exact = attention64(q.double(), k.double(), v.double())
    expect_tensor(lse, lse64(q, k, False).float(), what=f"flash_forward({dtype}): lse", atol=1e-3, rtol=1e-3)
    own = float((reference.flash_backward.flash_forward(q, k, v, False, 8)[0].double() - exact).abs().mean())
    err = float((out.double() - exact).abs().mean())
    expect(err <= 2 * own, f"flash_forward({dtype}): mean error {err:.3g} against float64, expected at most twice "
           f"the reference's {own:.3g}", "accumulate m, l and the output in float32 for half inputs")


# ---------------------------------------------------------------------------------------------- flash_attention_backward
def exact_saved(q, k, v, is_causal: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The O and lse a correct forward saves, from the oracle (so the backward is graded on its own)."""
    return attention64(q.double(), k.double(), v.double(), is_causal).to(q.dtype), lse64(q, k, is_causal).to(q.dtype)


def through_backward(q, k, v, do, is_causal: bool, block_size: int) -> list[Suspects]:
    """The backward's misconceptions for autograd's gradients (dq, dk, dv): the Function's backward runs the same
    recipe on the O and lse a correct forward saved."""
    out, lse = exact_saved(q, k, v, is_causal)
    return [backward_suspects(q, k, v, out, lse, do, is_causal, block_size, which) for which in range(3)]


def expect_backward(student, q, k, v, do, is_causal: bool, block_size: int, what: str) -> None:
    __tracebackhide__ = True
    out, lse = exact_saved(q, k, v, is_causal)
    got = student.flash_backward.flash_attention_backward(q, k, v, out, lse, do, is_causal, block_size)
    expect(isinstance(got, tuple) and len(got) == 3, f"{what}: got {type(got).__name__}, expected (dq, dk, dv)")
    _, want = oracle_grads(lambda a, b, c: attention64(a, b, c, is_causal), (q, k, v), do)
    for which, (name, g, w) in enumerate(zip(NAMES, got, want)):
        tol = {} if q.dtype == torch.float64 else {"atol": 1e-4, "rtol": 1e-3}
        expect_tensor(g, w.to(q.dtype), what=f"{what}: gradient of {name}", hint=BACKWARD_HINT, **tol,
                      suspects=backward_suspects(q, k, v, out, lse, do, is_causal, block_size, which))


@pytest.mark.points(0.875)
@pytest.mark.parametrize(("L", "S", "is_causal"), [(6, 13, False), (6, 13, True), (11, 11, True), (13, 5, False)])
def test_backward_matches_float64_autograd(student, gen, L, S, is_causal):
    q, k, v = qkv(gen, B=2, H=2, L=L, S=S, E=5, Ev=3, dtype=torch.float64)
    do = torch.randn(2, 2, L, 3, generator=gen, dtype=torch.float64)
    expect_backward(student, q, k, v, do, is_causal, 4,
                    f"flash_attention_backward(float64, L={L}, S={S}, is_causal={is_causal}, block_size=4)")


@pytest.mark.points(0.25)
@pytest.mark.parametrize("block_size", [1, 7, 64])
def test_backward_is_tile_size_invariant(student, gen, block_size):
    q, k, v = qkv(gen, B=1, H=2, L=19, S=19, E=4, Ev=4, dtype=torch.float64)
    do = torch.randn(1, 2, 19, 4, generator=gen, dtype=torch.float64)
    expect_backward(student, q, k, v, do, True, block_size, f"flash_attention_backward(L=S=19, causal, block_size="
                    f"{block_size})")


@pytest.mark.points(0.5)
def test_backward_rows_without_keys_have_zero_gradients(student, gen):
    q, k, v = qkv(gen, B=1, H=2, L=7, S=4, E=4, Ev=4, dtype=torch.float64)
    do = torch.randn(1, 2, 7, 4, generator=gen, dtype=torch.float64)
    out, lse = exact_saved(q, k, v, True)
    dq, _, _ = student.flash_backward.flash_attention_backward(q, k, v, out, lse, do, True, 2)
    hint = "lse = -inf marks a row with no key: its probabilities are 0 (exp(-inf - 0)), never exp(-inf + inf) = NaN"
    expect_finite(dq, what="flash_attention_backward(L=7, S=4, causal): dq", hint=hint)
    expect_backward(student, q, k, v, do, True, 2, "flash_attention_backward(L=7, S=4, causal)")


@pytest.mark.points(1)
def test_backward_never_materialises_the_score_matrix(student, gen):
    L = S = 4096
    q, k, v = qkv(gen, B=1, H=1, L=L, S=S, E=16, Ev=16)
    do = torch.randn(1, 1, L, 16, generator=gen)
    out, want = oracle_grads(lambda a, b, c: sdpa_fused(a, b, c, is_causal=True), (q, k, v), do)  # float32: 4096^2
    lse = torch.logsumexp(masked_scores(q, k, True), dim=-1)
    got, stats = student.flash_backward.flash_attention_backward.measure(q, k, v, out, lse, do, True, 64)
    for name, g, w in zip(NAMES, got, want):
        expect_tensor(g, w, what=f"flash_attention_backward(L=S={L}, causal): gradient of {name}", atol=1e-4, rtol=1e-3)
    full = L * S * 4
    hint = "recompute P one (L, block_size) tile at a time from lse; never build q @ k^T or P for all keys"
    expect(stats["max_tensor_bytes"] < full // 4, f"the largest tensor made during flash_attention_backward had "
           f"{stats['max_tensor_bytes']:.0f} bytes, expected below {full // 4} (the L x S scores have {full})", hint)
    outside = stats.get("max_memory_bytes")
    expect(outside is None or outside < full // 2, f"the sandbox's memory grew by {outside or 0:.0f} bytes during "
           f"flash_attention_backward, expected below {full // 2}", hint)


@pytest.mark.points(0.5)
def test_forward_and_backward_defaults_are_non_causal_with_tiles_of_64(student, gen):
    q, k, v = qkv(gen, B=1, H=2, L=9, S=100, E=4, Ev=3, dtype=torch.float64)  # 100 = 64 + 36: a ragged last tile
    do = torch.randn(1, 2, 9, 3, generator=gen, dtype=torch.float64)
    hint = "the defaults are is_causal=False and block_size=64 in flash_forward and flash_attention_backward alike"
    out, lse = expect_pair(student.flash_backward.flash_forward(q, k, v), "flash_forward(q, k, v)")
    expect_tensor(out, attention64(q, k, v), what="flash_forward(q, k, v) with the defaults (L=9, S=100): out", hint=hint,
                  suspects=flash_suspects(q, k, v, causal_default=True))
    expect_tensor(lse, lse64(q, k, False), what="flash_forward(q, k, v) with the defaults: lse", hint=hint)
    saved = exact_saved(q, k, v, False)
    got = student.flash_backward.flash_attention_backward(q, k, v, *saved, do)
    expect(isinstance(got, tuple) and len(got) == 3, f"flash_attention_backward: got {type(got).__name__}, expected "
           "(dq, dk, dv)")
    _, want = oracle_grads(attention64, (q, k, v), do)
    for which, (name, g, w) in enumerate(zip(NAMES, got, want)):
        expect_tensor(g, w, what=f"flash_attention_backward(q, k, v, out, lse, dO) with the defaults: gradient of {name}",
                      hint=hint, suspects=backward_suspects(q, k, v, *saved, do, False, 64, which))


# ---------------------------------------------------------------------------------------------- flash_attention (autograd)
@pytest.mark.points(0.75)
@pytest.mark.parametrize("is_causal", [False, True])
def test_autograd_gradients_match_float64_for_several_upstream_gradients(student, gen, is_causal):
    q, k, v = qkv(gen, B=1, H=2, L=5, S=9, E=4, Ev=3, dtype=torch.float64)
    for i in range(3):
        g = torch.randn(1, 2, 5, 3, generator=gen, dtype=torch.float64)
        expect_grads(student.flash_backward.flash_attention, (q, k, v), attention64, g, names=NAMES,
                     suspects=flash_suspects(q, k, v, is_causal=is_causal, block_size=3),
                     gradient_suspects=through_backward(q, k, v, g, is_causal, 3),
                     what=f"flash_attention(float64, L=5, S=9, is_causal={is_causal}, block_size=3) backward #{i + 1}",
                     is_causal=is_causal, block_size=3)


@pytest.mark.points(1)
def test_autograd_backward_never_materialises_the_score_matrix(student, gen):
    L = S = 2048  # the float32 scores are 16 MiB, one (L, 64) tile 512 KiB
    q, k, v = qkv(gen, B=1, H=1, L=L, S=S, E=16, Ev=16)
    g = torch.randn(1, 1, L, 16, generator=gen)
    (out, grads), stats = student.flash_backward.flash_attention.measure_grads(q, k, v, grad_output=g, is_causal=True,
                                                                               block_size=64)
    want_out, want = oracle_grads(lambda a, b, c: sdpa_fused(a, b, c, is_causal=True), (q, k, v), g)
    expect_tensor(out, want_out, what=f"flash_attention(L=S={L}, causal)", atol=1e-5)
    for name, got, w in zip(NAMES, grads, want):
        expect_tensor(got, w, what=f"flash_attention(L=S={L}, causal) backward: gradient of {name}", atol=1e-4,
                      rtol=1e-3, hint=GRAD_HINTS[name])
    full = L * S * 4
    expect(stats["max_tensor_bytes"] < full // 4, f"the largest tensor made during flash_attention's forward and "
           f"backward had {stats['max_tensor_bytes']:.0f} bytes, expected below {full // 4} (the L x S scores have "
           f"{full})", "FlashAttentionFunction.backward must call flash_attention_backward on the saved q, k, v, O and "
           "lse: recomputing the attention and letting autograd differentiate it (or saving P in the forward) builds "
           "the L x S matrices FlashAttention exists to avoid")
    outside = stats.get("max_memory_bytes")
    expect(outside is None or outside < full // 2, f"the sandbox's memory grew by {outside or 0:.0f} bytes during "
           f"flash_attention's forward and backward, expected below {full // 2}", "never build (L, S) tensors")


class ThroughStudent(torch.autograd.Function):
    """The student's forward and backward as one autograd node on the trusted side, for torch's gradcheck."""

    @staticmethod
    def forward(ctx, q, k, v, fn, kwargs):
        ctx.save_for_backward(q, k, v)
        ctx.fn, ctx.kwargs = fn, kwargs
        return fn(q.detach(), k.detach(), v.detach(), **kwargs)

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v = ctx.saved_tensors
        _, grads = ctx.fn.grads(q.detach(), k.detach(), v.detach(), grad_output=grad_out.contiguous(), **ctx.kwargs)
        return (*grads, None, None)


@pytest.mark.points(1)
@pytest.mark.parametrize("is_causal", [False, True])
def test_gradcheck_of_the_students_forward_against_its_backward(student, gen, is_causal):
    q, k, v = (x.requires_grad_(True) for x in qkv(gen, B=1, H=1, L=3, S=5, E=2, Ev=2, dtype=torch.float64))
    fn, kwargs = student.flash_backward.flash_attention, {"is_causal": is_causal, "block_size": 2}
    try:  # finite differences of the student's forward vs the student's backward, computed here
        torch.autograd.gradcheck(lambda a, b, c: ThroughStudent.apply(a, b, c, fn, kwargs), (q, k, v),
                                 check_undefined_grad=False)
    except GradcheckError as exc:
        fail(f"gradcheck(flash_attention, float64, L=3, S=5, is_causal={is_causal}, block_size=2) failed: the "
             f"backward is not the derivative of the forward: {str(exc).splitlines()[0]}", BACKWARD_HINT)


@pytest.mark.points(0.75)
@pytest.mark.parametrize(("L", "is_causal"), [(96, True), (64, False), (40, True)])
def test_autograd_gradients_match_sdpa_on_larger_inputs(student, gen, L, is_causal):
    q, k, v = qkv(gen, B=2, H=4, L=L, S=96, E=32, Ev=32)
    g = torch.randn(2, 4, L, 32, generator=gen)
    out, grads = student.flash_backward.flash_attention.grads(q, k, v, grad_output=g, is_causal=is_causal, block_size=16)
    mask = torch.ones(L, 96, dtype=torch.bool).tril(96 - L) if is_causal else None  # bottom-right
    want_out, want = oracle_grads(lambda a, b, c: sdpa_math(a, b, c, attn_mask=mask), (q, k, v), g)
    what = f"flash_attention(B=2, H=4, L={L}, S=96, E=32, is_causal={is_causal}, block_size=16)"
    expect_tensor(out, want_out, what=what, atol=1e-5)
    for name, got, w in zip(NAMES, grads, want):
        expect_tensor(got, w, what=f"{what}: gradient of {name} vs SDPA's", atol=1e-4, rtol=1e-3, hint=GRAD_HINTS[name])


@pytest.mark.points(0.5)
def test_autograd_defaults_are_non_causal_with_tiles_of_64(student, gen):
    q, k, v = qkv(gen, B=1, H=2, L=9, S=100, E=4, Ev=4, dtype=torch.float64)  # 100 = 64 + 36: a ragged last tile
    g = torch.randn(1, 2, 9, 4, generator=gen, dtype=torch.float64)
    expect_grads(student.flash_backward.flash_attention, (q, k, v), attention64, g, names=NAMES,
                 gradient_suspects=through_backward(q, k, v, g, False, 64),
                 what="flash_attention(q, k, v) with default is_causal and block_size (L=9, S=100)")


@pytest.mark.points(0.5)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_autograd_half_precision_gradients(student, reference, gen, dtype):
    q, k, v = (x.to(dtype) for x in qkv(gen, B=1, H=2, L=24, S=48, E=16, Ev=16))
    g = torch.randn(1, 2, 24, 16, generator=gen).to(dtype)
    _, grads = student.flash_backward.flash_attention.grads(q, k, v, grad_output=g, is_causal=True, block_size=8)
    _, exact = oracle_grads(lambda a, b, c: attention64(a, b, c, True), [x.double() for x in (q, k, v)], g.double())
    _, ref = oracle_grads(lambda a, b, c: reference.flash_backward.flash_attention(a, b, c, True, 8), (q, k, v), g)
    for name, got, want, own in zip(NAMES, grads, exact, ref):
        expect(got.dtype == dtype, f"gradient of {name} for {dtype} inputs: got {got.dtype}, expected {dtype}",
               "cast dq, dk, dv back to the inputs' dtypes")
        expect_tensor(got, want.to(dtype), what=f"flash_attention({dtype}) gradient of {name}", atol=5e-2, rtol=5e-2)
        err, ref_err = (float((x.double() - want).abs().mean()) for x in (got, own))
        expect(err <= 2 * ref_err, f"flash_attention({dtype}): gradient of {name} has a mean error of {err:.3g} against "
               f"float64, expected at most twice the reference's {ref_err:.3g}",
               "compute the backward's tiles (P, dP, dS) and the accumulated dq in float32 for half inputs")


@pytest.mark.points(0.5)
def test_everything_follows_the_input_device(student, gen):
    q, k, v = qkv(gen, B=1, H=2, L=6, S=9, E=4, Ev=4)
    expect_tensor(student.flash_backward.flash_attention(q, k, v, True, 4),
                  attention64(q, k, v, True), what="flash_attention(L=6, S=9, causal)")
    out, lse = exact_saved(q, k, v, True)
    for name, args in (("flash_forward", (q, k, v, True, 4)), ("flash_attention", (q, k, v, True, 4)),
                       ("flash_attention_backward", (q, k, v, out, lse, out, True, 4))):
        expect_on_input_device(lambda n=name, a=args: getattr(student.flash_backward, n).on_meta(*a),
                               what=f"{name} on the meta device")


@pytest.mark.severe(OVERFLOW)
@pytest.mark.points(0.5)
def test_large_scores_stay_finite_forward_and_backward(student, gen):
    q, k, v = qkv(gen, B=1, H=2, L=20, S=20, E=16, Ev=4)
    # every score ~150, the softmax unsaturated: a wrong scale shows on every draw; the shift rides on the first
    # feature, so that qkv's ramp (the last) still makes the last tile raise each rising head's running max
    q0, k0 = q, k
    q, k = shifted_qk(q, k, feature=0)
    g = torch.randn(1, 2, 20, 4, generator=gen)
    grads_of = student.flash_backward.flash_attention.grads
    out, grads = expect_stable(lambda: grads_of(q, k, v, grad_output=g, block_size=6),
                               lambda: grads_of(q0, k0, v, grad_output=g, block_size=6),
                               what="flash_attention(scores ~150), forward and backward")
    want_out, want = oracle_grads(attention64, [x.double() for x in (q, k, v)], g.double())
    expect_tensor(out, want_out.float(), what="flash_attention(scores ~150)", atol=1e-3, rtol=1e-3)
    for name, got, w in zip(NAMES, grads, want):
        expect_tensor(got, w.float(), what=f"gradient of {name} (scores ~150)", atol=1e-3, rtol=1e-3)


# ---------------------------------------------------------------------------------------------- CUDA (extra)
@pytest.mark.cuda
@pytest.mark.points(0.5)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_cuda_half_gradients_are_as_accurate_as_the_flash_kernel(student, gen, dtype):
    q, k, v = (torch.randn(2, 4, 512, 64, generator=gen).to(device="cuda", dtype=dtype) for _ in range(3))
    g = torch.randn(2, 4, 512, 64, generator=gen).to(device="cuda", dtype=dtype)
    out, grads = student.flash_backward.flash_attention.grads(q, k, v, grad_output=g, is_causal=True, block_size=64)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        kernel_out, kernel = oracle_grads(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True),
                                          (q, k, v), g)
    truth_out, truth = oracle_grads(lambda a, b, c: attention64(a, b, c, True), [x.double() for x in (q, k, v)],
                                    g.double())
    # a sandboxed reply arrives on the CPU: compare there
    expect_no_worse_than(out.cpu(), kernel_out.cpu(), truth_out.cpu(), what=f"flash_attention on CUDA ({dtype})")
    for name, got, kern, want in zip(NAMES, grads, kernel, truth):
        expect_no_worse_than(got.cpu(), kern.cpu(), want.cpu(), what=f"gradient of {name} on CUDA ({dtype})",
                             hint="compute the backward's tiles in float32 for half inputs; cast dq, dk, dv back once")
