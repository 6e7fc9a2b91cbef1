"""Public tests for `flash_backward`: the forward's log-sum-exp, the FlashAttention-2 backward, the autograd.Function."""

from __future__ import annotations

import math

import pytest
import torch

from grader.testing.attention import sdpa_math
from grader.testing.checks import expect, expect_tensor
from grader.testing.diagnosis import NO_SUSPECTS
from grader.testing.gradients import expect_grads, oracle_grads

pytestmark = pytest.mark.exercise("flash_backward")


def scores64(q: torch.Tensor, k: torch.Tensor, is_causal: bool) -> torch.Tensor:
    s = q.double() @ k.double().transpose(-2, -1) / math.sqrt(q.shape[-1])
    L, S = s.shape[-2:]
    return s.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(S - L), float("-inf")) if is_causal else s


def attention(q, k, v, is_causal: bool = False, block_size: int = 64) -> torch.Tensor:
    """Plain softmax attention (differentiable), bottom-right causal; every row sees a key in these tests."""
    return torch.softmax(scores64(q, k, is_causal).to(q.dtype), dim=-1) @ v


def qkv(L: int, S: int, E: int = 8, Ev: int = 8, B: int = 2, H: int = 2, dtype=torch.float64, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, H, L, E, generator=g, dtype=dtype), torch.randn(B, H, S, E, generator=g, dtype=dtype),
            torch.randn(B, H, S, Ev, generator=g, dtype=dtype))


@pytest.mark.points(4)
def test_flash_forward_returns_the_output_and_the_row_logsumexp(student):
    q, k, v = qkv(L=6, S=11, E=4, Ev=3)
    out, lse = student.flash_backward.flash_forward(q, k, v, True, 4)  # tiles of 4, 4 and 3 keys
    expect_tensor(out, attention(q, k, v, True), what="flash_forward(L=6, S=11, is_causal=True, block_size=4): out")
    expect_tensor(lse, torch.logsumexp(scores64(q, k, True), dim=-1), what="flash_forward(...): lse, shape (B, H, L)",
                  hint="lse = m + log(l) from the final running max and denominator, after the last tile")


@pytest.mark.points(6)
def test_flash_attention_backward_matches_autograd(student):
    q, k, v = qkv(L=7, S=10, E=4, Ev=5)
    do = torch.randn(2, 2, 7, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    out = attention(q, k, v)
    lse = torch.logsumexp(scores64(q, k, False), dim=-1)
    got = student.flash_backward.flash_attention_backward(q, k, v, out, lse, do, False, 4)
    _, want = oracle_grads(attention, (q, k, v), do)
    for name, g, w in zip(("query", "key", "value"), got, want):
        expect_tensor(g, w, what=f"flash_attention_backward(L=7, S=10, block_size=4): gradient of {name}",
                      hint="P = exp(S - lse); dV = P^T dO; dS = P * (dO V^T - D), D = rowsum(dO * O); "
                           "dQ = dS K * scale, dK = dS^T Q * scale")


@pytest.mark.points(5)
def test_flash_attention_gradients_causal(student):
    q, k, v = qkv(L=9, S=9, E=4, Ev=4)
    g = torch.randn(2, 2, 9, 4, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    expect_grads(student.flash_backward.flash_attention, (q, k, v), attention, g, names=("query", "key", "value"),
                 gradient_suspects=NO_SUSPECTS, what="flash_attention(L=S=9, is_causal=True, block_size=4) backward",
                 is_causal=True, block_size=4)


@pytest.mark.points(4)
def test_flash_attention_gradients_match_sdpa_in_float32(student):
    q, k, v = qkv(L=48, S=48, E=16, Ev=16, dtype=torch.float32)
    g = torch.randn(2, 2, 48, 16, generator=torch.Generator().manual_seed(3))
    out, grads = student.flash_backward.flash_attention.grads(q, k, v, grad_output=g, is_causal=True, block_size=16)
    want_out, want = oracle_grads(lambda a, b, c: sdpa_math(a, b, c, is_causal=True), (q, k, v), g)
    expect_tensor(out, want_out, what="flash_attention(L=S=48, is_causal=True)")
    for name, got, w in zip(("query", "key", "value"), grads, want):
        expect_tensor(got, w, what=f"gradient of {name} vs SDPA's", atol=1e-4, rtol=1e-3)


@pytest.mark.points(3)
def test_backward_never_builds_the_full_score_matrix(student):
    q, k, v = qkv(L=512, S=512, E=16, Ev=16, B=1, H=1, dtype=torch.float32)
    do = torch.randn(1, 1, 512, 16, generator=torch.Generator().manual_seed(4))
    out, want = oracle_grads(sdpa_math, (q, k, v), do)
    lse = torch.logsumexp(scores64(q, k, False), dim=-1).float()
    got, stats = student.flash_backward.flash_attention_backward.measure(q, k, v, out, lse, do, False, 32)
    expect_tensor(got[2], want[2], what="flash_attention_backward(L=S=512): gradient of value", atol=1e-4, rtol=1e-3)
    full = 512 * 512 * 4
    expect(stats["max_tensor_bytes"] < full / 4,
           f"the largest tensor made during flash_attention_backward had {stats['max_tensor_bytes']:.0f} bytes, expected "
           f"well below the {full} bytes of the full 512 x 512 score matrix",
           hint="recompute P one (L, block_size) tile at a time from lse")
