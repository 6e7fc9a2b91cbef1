"""grader/testing/precision.py on CPU: half-precision accumulation fails, float32 accumulation passes."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from grader.testing.precision import errors, expect_no_worse_than


def truth(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    s = q.double() @ k.double().transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(s, dim=-1) @ v.double()


def inputs(dtype: torch.dtype, L: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(L)
    return tuple(torch.randn(2, 4, L, 64, generator=g).to(dtype) for _ in range(3))


@pytest.mark.parametrize("L", [128, 512])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_float32_accumulation_passes_and_half_accumulation_fails(dtype, L):
    q, k, v = inputs(dtype, L)
    t = truth(q, k, v)
    kernel = t.float().to(
        dtype
    )  # what a float32-accumulating kernel returns: the truth, rounded once
    tiled = torch.cat(
        [
            F.scaled_dot_product_attention(q[..., i : i + 32, :].float(), k.float(), v.float())
            for i in range(0, L, 32)
        ],
        dim=-2,
    ).to(dtype)  # another float32 route
    expect_no_worse_than(tiled, kernel, t, what="float32-accumulating attention")
    half = torch.softmax((q @ k.transpose(-2, -1)) / 8, dim=-1) @ v  # every step in half precision
    assert (
        errors(half, t)[0] > 2 * errors(kernel, t)[0]
    )  # the premise: half accumulation is far worse
    with pytest.raises(
        pytest.fail.Exception, match=r"expected at most 1\.75x the reference kernel's mean error"
    ):
        expect_no_worse_than(half, kernel, t, what="half-accumulating attention")


def test_a_wrong_dtype_or_a_nan_fails_first():
    q, k, v = inputs(torch.float16, 128)
    t = truth(q, k, v)
    kernel = t.to(torch.float16)
    with pytest.raises(pytest.fail.Exception, match="dtype"):
        expect_no_worse_than(t.float(), kernel, t, what="out")
    bad = kernel.clone()
    bad[0, 0, 0, 0] = float("nan")
    with pytest.raises(pytest.fail.Exception, match=r"NaN|nan|finite"):
        expect_no_worse_than(bad, kernel, t, what="out")
