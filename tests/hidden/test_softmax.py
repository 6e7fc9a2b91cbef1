"""Hidden tests for `softmax`: float64 oracle, any `dim`, batched inputs, overflow in fp32 and fp16."""

from __future__ import annotations

import pytest
import torch

from grader.testing.checks import expect_finite, expect_tensor
from grader.testing.gradients import GRAD_HINT, expect_grads

pytestmark = pytest.mark.exercise("softmax")

OVERFLOW = "outputs become inf or NaN for inputs of ordinary size (a softmax without the max subtracted)"


def oracle(x: torch.Tensor, dim: int) -> torch.Tensor:
    """float64 hand computation, cast back to the input dtype."""
    x64 = x.double()
    e = torch.exp(x64 - x64.amax(dim=dim, keepdim=True))
    return (e / e.sum(dim=dim, keepdim=True)).to(x.dtype)


@pytest.mark.points(0.5)
@pytest.mark.parametrize("dim", [-1, 0, 1])  # dim=0 on a batch: the seed's hard-coded sum(dim=0) passes only here
def test_naive_matches_float64_oracle_along_any_dim(student, gen, dim):
    x = torch.randn(3, 4, 5, generator=gen)
    got = student.softmax.softmax_naive(x, dim=dim)
    expect_tensor(got, oracle(x, dim), what=f"softmax_naive(x of shape (3, 4, 5), dim={dim})",
                  hint="sum along the `dim` you were given, with keepdim=True so it broadcasts")
    if dim == -1:  # the default must be the last dim, as in torch.softmax's usual call
        expect_tensor(student.softmax.softmax_naive(x), oracle(x, -1), what="softmax_naive(x) with the default dim",
                      hint="keep the signature softmax_naive(x, dim=-1): the default dim is -1")


@pytest.mark.points(0.75)
@pytest.mark.parametrize("dim", [-1, 1])
def test_stable_matches_float64_oracle_along_any_dim(student, gen, dim):
    x = torch.randn(2, 6, 7, generator=gen) * 3
    got = student.softmax.softmax_stable(x, dim=dim)
    expect_tensor(got, oracle(x, dim), what=f"softmax_stable(x of shape (2, 6, 7), dim={dim})")
    sums = got.double().sum(dim=dim)
    expect_tensor(sums, torch.ones_like(sums), what="sums along dim", atol=1e-5, rtol=0,
                  hint="each slice along `dim` must sum to 1")


@pytest.mark.severe(OVERFLOW)
@pytest.mark.points(1)
def test_stable_has_no_overflow_at_plus_minus_1000(student, gen):
    x = (torch.rand(4, 9, generator=gen) * 2 - 1) * 1000  # uniform in [-1000, 1000]
    got = student.softmax.softmax_stable(x)
    expect_finite(got, what="softmax_stable(x in [-1000, 1000])",
                  hint="subtract the max along dim before exp: exp(88.8) is already inf in float32")
    expect_tensor(got, oracle(x, -1), what="softmax_stable(x in [-1000, 1000])")


@pytest.mark.points(1)
def test_stable_in_float16_keeps_dtype_and_has_no_overflow(student, gen):
    x = (torch.randn(3, 8, generator=gen) * 20).half()  # exp(x) overflows float16 above 11.09
    got = student.softmax.softmax_stable(x, dim=-1)
    expect_finite(got, what="softmax_stable(float16 x * 20)")
    expect_tensor(got, oracle(x, -1), what="softmax_stable(float16 x * 20)", atol=2e-3, rtol=2e-3)


@pytest.mark.points(0.5)
def test_stable_is_shift_invariant(student, gen):
    x = torch.randn(5, 6, generator=gen)
    a = student.softmax.softmax_stable(x)
    b = student.softmax.softmax_stable(x + 500.0)
    expect_tensor(a, oracle(x, -1), what="softmax_stable(x)")  # a property alone would pass a constant answer
    expect_finite(b, what="softmax_stable(x + 500)")
    expect_tensor(b, a, what="softmax_stable(x + 500) vs softmax_stable(x)",
                  hint="adding the same constant to a row must not change its softmax")


@pytest.mark.points(0.5)
def test_float64_gradients_match_the_oracle(student, gen):
    x = torch.randn(3, 4, 5, generator=gen, dtype=torch.float64) * 3
    g = torch.randn(3, 4, 5, generator=gen, dtype=torch.float64)
    for name in ("softmax_naive", "softmax_stable"):
        expect_grads(getattr(student.softmax, name), (x,), oracle, g, what=f"{name}(float64 x, dim=1) backward",
                     names=("x",), hint=GRAD_HINT, dim=1)
