"""Public tests for `masks`: small masks written out by hand, the causal mask inside SDPA, to_additive's dtype and
the caller's mask left as it was."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from grader.testing.catalogue.masks import FINITE_FILL, additive_suspects, bool_mask_kind, causal_suspects, padding_suspects
from grader.testing.checks import expect, expect_call, expect_tensor

pytestmark = pytest.mark.exercise("masks")

INF = float("inf")


def expect_bool(got, what: str) -> None:
    said = bool_mask_kind(got) if type(got) is torch.Tensor else None
    expect(type(got) is torch.Tensor and got.dtype == torch.bool,
           f"{what}: got {getattr(got, 'dtype', type(got).__name__)}, expected a torch.bool tensor"
           + (f"\n  {said}" if said else ""))


@pytest.mark.points(2)
def test_causal_mask_of_four_tokens(student):
    got = student.masks.causal_mask(4)
    expected = torch.tensor([[True, False, False, False],
                             [True, True, False, False],
                             [True, True, True, False],
                             [True, True, True, True]])
    expect_bool(got, "causal_mask(4)")
    expect_tensor(got, expected, what="causal_mask(4)", suspects=causal_suspects(4))


@pytest.mark.points(2)
def test_causal_mask_in_sdpa_equals_is_causal(student):
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 5, 4, generator=gen) for _ in range(3))  # (B, H, T, hd)
    mask = student.masks.causal_mask(5)
    expect_bool(mask, "causal_mask(5)")
    with sdpa_kernel(SDPBackend.MATH):
        got = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    expect_tensor(got, expected, what="SDPA(q, k, v, attn_mask=causal_mask(5)) vs SDPA(..., is_causal=True)")


@pytest.mark.points(2)
def test_padding_mask_of_three_sequences(student):
    lengths = torch.tensor([3, 1, 0])
    expected = torch.tensor([[True, True, True, False],
                             [True, False, False, False],
                             [False, False, False, False]])
    got = expect_call(lambda: student.masks.padding_mask(lengths, 4), expected, check_values=False,
                      what="padding_mask(lengths=[3, 1, 0], max_len=4)", suspects=padding_suspects(lengths, 4))
    expect_bool(got, "padding_mask(lengths=[3, 1, 0], max_len=4)")
    expect_tensor(got, expected, what="padding_mask(lengths=[3, 1, 0], max_len=4)",
                  suspects=padding_suspects(lengths, 4))


@pytest.mark.points(2)
def test_to_additive_of_a_causal_mask(student):
    mask = torch.ones(3, 3, dtype=torch.bool).tril()
    expected = torch.tensor([[0.0, -INF, -INF],
                             [0.0, 0.0, -INF],
                             [0.0, 0.0, 0.0]])
    expect_call(lambda: student.masks.to_additive(mask), expected, what="to_additive(tril mask of 3)",
                suspects=additive_suspects(mask) + FINITE_FILL)
    expect_call(lambda: student.masks.to_additive(mask, dtype=torch.float64), expected.double(),
                what="to_additive(tril mask of 3, dtype=torch.float64)",
                suspects=additive_suspects(mask, torch.float64) + FINITE_FILL)
