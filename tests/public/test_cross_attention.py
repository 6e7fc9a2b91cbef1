"""Public tests for `cross_attention`: shapes with L != S, agreement with nn.MultiheadAttention, padding."""

from __future__ import annotations

import pytest
import torch

from grader.testing.attention import expect_params, mha_oracle
from grader.testing.checks import expect, expect_finite, expect_shape, expect_tensor

pytestmark = pytest.mark.exercise("cross_attention")

NAMES = ("W_query.weight", "W_key.weight", "W_value.weight", "out_proj.weight", "out_proj.bias")
NAMES_HINT = "name the layers W_query, W_key, W_value (nn.Linear(d_model, d_model, bias=qkv_bias)) and out_proj"


def student_params(h) -> dict[str, torch.Tensor]:
    return expect_params(h.named_parameters(), NAMES, NAMES_HINT, what="CrossAttention parameters")


@pytest.mark.points(2)
def test_output_shape_when_query_and_context_lengths_differ(student, gen):
    x, context = torch.randn(2, 3, 8, generator=gen), torch.randn(2, 5, 8, generator=gen)
    h = student.cross_attention.CrossAttention(8, 2)
    h.eval()
    out = h(x, context)
    expect_shape(out, (2, 3, 8), what="CrossAttention(8, 2)(x of shape (2, 3, 8), context of shape (2, 5, 8))",
                 hint="one output row per QUERY (L = 3); the keys and values have their own length S = 5: "
                      "reshape them with context.shape[1], not with x's length")


@pytest.mark.points(3)
def test_matches_nn_multihead_attention(student, gen):
    x, context = torch.randn(2, 3, 8, generator=gen), torch.randn(2, 5, 8, generator=gen)
    h = student.cross_attention.CrossAttention(8, 2)
    h.eval()
    expected = mha_oracle(student_params(h), 2, x, context)
    expect_tensor(h(x, context), expected, what="CrossAttention(8, 2) vs nn.MultiheadAttention(8, 2) with your weights",
                  hint="queries from x, keys and values from context; split into heads with "
                       "view(B, T, H, head_dim).transpose(1, 2); scale by 1/sqrt(head_dim); end with out_proj")


@pytest.mark.points(3)
def test_padded_context_tokens_are_ignored(student, gen):
    x, context = torch.randn(2, 4, 8, generator=gen), torch.randn(2, 6, 8, generator=gen)
    keep = torch.tensor([[True] * 6, [True, True, True, False, False, False]])  # item 1 has 3 real tokens
    h = student.cross_attention.CrossAttention(8, 2)
    h.eval()
    out = h(x, context, keep)
    expect_finite(out, what="CrossAttention with a key_padding_mask",
                  hint="True means 'real token, attend'; a row with every key masked turns into NaN")
    expect_tensor(out, mha_oracle(student_params(h), 2, x, context, keep=keep),
                  what="CrossAttention with key_padding_mask vs nn.MultiheadAttention(key_padding_mask=~mask)",
                  hint="mask the scores where key_padding_mask is False, broadcast as (B, 1, 1, S)")
    noisy = context.clone()
    noisy[1, 3:] += 10 * torch.randn(3, 8, generator=gen)
    expect_tensor(h(x, noisy, keep), out, what="output after changing the PADDED context tokens",
                  hint="padding (mask False) must get weight exactly 0, so its keys and values cannot matter")


@pytest.mark.points(2)
def test_each_output_row_depends_only_on_its_own_query(student, gen):
    x, context = torch.randn(2, 4, 8, generator=gen), torch.randn(2, 5, 8, generator=gen)
    h = student.cross_attention.CrossAttention(8, 2)
    h.eval()
    out = h(x, context)
    changed = x.clone()
    changed[:, 2] += 3 * torch.randn(2, 8, generator=gen)
    out2 = h(changed, context)
    expect_shape(out2, (2, 4, 8), what="CrossAttention output")
    rows = [0, 1, 3]
    expect_tensor(out2[:, rows], out[:, rows], what="rows 0, 1, 3 of the output after changing query token 2",
                  hint="cross-attention lets each query look at the CONTEXT only: queries never mix with each other")
    expect(not torch.allclose(out2[:, 2], out[:, 2]), "row 2 of the output did not change when query token 2 did",
           "the queries must come from x")
