"""Public tests for `masks`: small masks written out by hand, and the causal mask inside SDPA."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from grader.testing.checks import expect, expect_tensor

pytestmark = pytest.mark.exercise("masks")

INF = float("inf")


@pytest.mark.points(2)
def test_causal_mask_of_four_tokens(student):
    got = student.masks.causal_mask(4)
    expected = torch.tensor([[True, False, False, False],
                             [True, True, False, False],
                             [True, True, True, False],
                             [True, True, True, True]])
    expect_tensor(got, expected, what="causal_mask(4)",
                  hint="True = may attend: query i (row) sees keys 0..i (columns), so the mask is lower "
                       "triangular and boolean: torch.tril on a dtype=torch.bool tensor")


@pytest.mark.points(2)
def test_causal_mask_in_sdpa_equals_is_causal(student):
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 5, 4, generator=gen) for _ in range(3))  # (B, H, T, hd)
    mask = student.masks.causal_mask(5)
    expect(type(mask) is torch.Tensor and mask.dtype == torch.bool,
           f"causal_mask(5): got {getattr(mask, 'dtype', type(mask).__name__)}, expected a torch.bool tensor",
           hint="SDPA adds a float mask to the scores: a 0/1 float mask masks nothing")
    with sdpa_kernel(SDPBackend.MATH):
        got = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    expect_tensor(got, expected, what="SDPA(q, k, v, attn_mask=causal_mask(5)) vs SDPA(..., is_causal=True)",
                  hint="in SDPA a boolean True means 'take part'; triu(diagonal=1) is the BLOCKED set, not the kept one")


@pytest.mark.points(2)
def test_padding_mask_of_three_sequences(student):
    got = student.masks.padding_mask(torch.tensor([3, 1, 0]), 4)
    expected = torch.tensor([[True, True, True, False],
                             [True, False, False, False],
                             [False, False, False, False]])
    expect_tensor(got, expected, what="padding_mask(lengths=[3, 1, 0], max_len=4)",
                  hint="True where position j < lengths[b] (a real token), False on the padding; "
                       "compare torch.arange(max_len)[None, :] with lengths[:, None]")


@pytest.mark.points(2)
def test_to_additive_of_a_causal_mask(student):
    mask = torch.ones(3, 3, dtype=torch.bool).tril()
    got = student.masks.to_additive(mask)
    expected = torch.tensor([[0.0, -INF, -INF],
                             [0.0, 0.0, -INF],
                             [0.0, 0.0, 0.0]])
    expect_tensor(got, expected, what="to_additive(tril mask of 3)",
                  hint="0.0 where the mask is True (may attend), exactly -inf (float('-inf')) where it is False")
