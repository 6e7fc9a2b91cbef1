"""Public tests for `cross_attention`: shapes with L != S, agreement with nn.MultiheadAttention, padding, the
parameters, dropout in eval and training mode, large scores."""

from __future__ import annotations

import pytest
import torch

from grader.testing.attention import expect_params, mha_oracle
from grader.testing.catalogue.modules import cross_suspects
from grader.testing.catalogue.structure import expect_structure
from grader.testing.checks import expect, expect_call, expect_shape, expect_tensor
from grader.testing.oracles import expect_dropout_on_weights, expect_repeatable
from grader.testing.params import transplant

pytestmark = pytest.mark.exercise("cross_attention")

NAMES = ("W_query.weight", "W_key.weight", "W_value.weight", "out_proj.weight", "out_proj.bias")
NAMES_HINT = "name the layers W_query, W_key, W_value (nn.Linear(d_model, d_model, bias=qkv_bias)) and out_proj"


def student_params(h) -> dict[str, torch.Tensor]:
    return expect_params(h.named_parameters(), NAMES, NAMES_HINT, what="CrossAttention parameters")


@pytest.mark.points(1.5)
def test_the_parameters_follow_qkv_bias(student):
    for bias in (False, True):
        h = student.cross_attention.CrossAttention(8, 2, qkv_bias=bias)
        got = {k: tuple(v.shape) for k, v in h.named_parameters().items()}
        want = {f"{n}.{kind}": shape for n in ("W_query", "W_key", "W_value")
                for kind, shape in (("weight", (8, 8)), ("bias", (8,)))[: 1 + bias]}
        want.update({"out_proj.weight": (8, 8), "out_proj.bias": (8,)})
        expect_structure(got, want, what=f"named_parameters() of CrossAttention(8, 2, qkv_bias={bias})")


@pytest.mark.points(2.5)
def test_matches_nn_multihead_attention(student, gen):
    x, context = torch.randn(2, 3, 8, generator=gen), torch.randn(2, 5, 8, generator=gen)  # L = 3, S = 5
    h = student.cross_attention.CrossAttention(8, 2)
    h.eval()
    p = student_params(h)
    expect_call(lambda: h(x, context), mha_oracle(p, 2, x, context), suspects=cross_suspects(x, context, p, 2),
                what="CrossAttention(8, 2) on x (2, 3, 8) and context (2, 5, 8) vs nn.MultiheadAttention(8, 2)")
    big = x * 30  # scores of several hundred: exp overflows unless the row max is subtracted
    expect_call(lambda: h(big, context * 30), mha_oracle(p, 2, big, context * 30), atol=1e-4, rtol=1e-3,
                what="CrossAttention on x * 30 and context * 30", suspects=cross_suspects(big, context * 30, p, 2))


@pytest.mark.points(2.5)
def test_padded_context_tokens_are_ignored(student, gen):
    x, context = torch.randn(2, 4, 8, generator=gen), torch.randn(2, 6, 8, generator=gen)
    keep = torch.tensor([[True] * 6, [True, True, True, False, False, False]])  # item 1 has 3 real tokens
    h = student.cross_attention.CrossAttention(8, 2)
    h.eval()
    p = student_params(h)
    out = expect_call(lambda: h(x, context, keep), mha_oracle(p, 2, x, context, keep=keep),
                      what="CrossAttention with key_padding_mask vs nn.MultiheadAttention(key_padding_mask=~mask)",
                      suspects=cross_suspects(x, context, p, 2, keep))
    noisy = context.clone()
    noisy[1, 3:] += 10 * torch.randn(3, 8, generator=gen)
    expect_tensor(h(x, noisy, keep), out, what="output after changing the PADDED context tokens")


@pytest.mark.points(1.5)
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
    expect_tensor(out2[:, rows], out[:, rows], what="rows 0, 1, 3 of the output after changing query token 2")
    expect(not torch.allclose(out2[:, 2], out[:, 2]), "row 2 of the output did not change when query token 2 did")


@pytest.mark.points(2)
def test_dropout_is_off_in_eval_and_on_in_training(student, gen):
    x, context = torch.randn(2, 3, 8, generator=gen), torch.randn(2, 5, 8, generator=gen)
    h = student.cross_attention.CrossAttention(8, 2, dropout=0.5)
    h.eval()
    first = h(x, context)
    expect_repeatable(first, h(x, context), what="two eval-mode calls of CrossAttention(dropout=0.5)")
    p = student_params(h)
    expect_tensor(first, mha_oracle(p, 2, x, context), what="eval-mode output with dropout=0.5",
                  suspects=cross_suspects(x, context, p, 2))
    h.train()
    expect(not torch.equal(h(x, context), h(x, context)), "two training-mode calls with dropout=0.5 gave identical "
           "outputs")
    # W_value and out_proj the identity: the output is each head's dropout(weights) @ the context's slice
    d, H, S, p_drop = 16, 2, 5, 0.3
    h = student.cross_attention.CrossAttention(d, H, dropout=p_drop)
    w = {"W_query.weight": torch.randn(d, d, generator=gen) / 4, "W_key.weight": torch.randn(d, d, generator=gen) / 4,
         "W_value.weight": torch.eye(d), "out_proj.weight": torch.eye(d), "out_proj.bias": torch.zeros(d)}
    transplant(h, w, hint=NAMES_HINT)
    h.to(dtype=torch.float64)
    h.train()
    x, context = (torch.randn(32, n, d, generator=gen, dtype=torch.float64) for n in (3, S))
    heads = h(x, context).view(32, 3, H, d // H).transpose(1, 2)
    q = (x @ w["W_query.weight"].double().T).view(32, 3, H, d // H).transpose(1, 2)
    k = (context @ w["W_key.weight"].double().T).view(32, S, H, d // H).transpose(1, 2)
    weights = torch.softmax(q @ k.transpose(-2, -1) / (d // H) ** 0.5, dim=-1)
    expect_dropout_on_weights(heads, weights, context.view(32, S, H, d // H).transpose(1, 2), p_drop,
                              what="training-mode output (W_value and out_proj the identity), per head")
