"""Public tests for `decaying_attention`: the seed's shapes, known float64 values, gamma's gradient,
and the ALiBi slopes for 8 and 12 heads."""

from __future__ import annotations

import pytest
import torch

from grader.testing.catalogue.decaying import (decaying_forward, decaying_suspects, gamma_init_suspects,
                                                slopes_suspects)
from grader.testing.checks import expect, expect_call, expect_finite, expect_tensor, fail
from grader.testing.diagnosis import tag

pytestmark = pytest.mark.exercise("decaying_attention")


def student_params(h) -> dict[str, torch.Tensor]:
    params = h.named_parameters()
    missing = [n for n in ("qkv.weight", "qkv.bias", "gamma") if n not in params]
    if missing:
        fail(f"DecayingAttention parameters: got {sorted(params)}, expected to find {missing}" + (
            "\n  " + NOT_LEARNED if missing == ["gamma"] else ""))
    return params


NOT_LEARNED = tag("gamma-not-parameter", "gamma is not a learnable parameter used in forward (a buffer, a plain "
                  "tensor or a copy never learns): nn.Parameter(torch.ones(num_heads, 1, 1))")


def golden_case() -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
    """Deterministic float64 inputs for DecayingAttention(4, 2) on 3 tokens: parameters, x and an upstream
    gradient. The expected numbers below were computed from them once, in float64, by two independent
    implementations (the public tests hand out numbers, not an implementation)."""
    C, H, L = 4, 2, 3
    n = torch.arange(3 * C * C, dtype=torch.float64)
    params = {"qkv.weight": (0.5 * torch.cos(1.7 * n)).reshape(3 * C, C),
              "qkv.bias": 0.1 * torch.sin(torch.arange(3 * C, dtype=torch.float64)),
              "gamma": torch.tensor([0.1, 1.5], dtype=torch.float64).view(H, 1, 1)}  # distinct per head
    x = 2 * torch.sin(0.9 * torch.arange(L * C, dtype=torch.float64) + 0.3).reshape(1, L, C)
    g = torch.cos(0.4 * torch.arange(L * C, dtype=torch.float64)).reshape(1, L, C)
    return params, x, g


GOLDEN_OUTPUT = torch.tensor([[[0.8283102161, 1.0059610912, -0.1271466883, -0.3162057206],
                               [0.0509139389, -0.0729230004, -0.1421445534, -0.2581320634],
                               [0.1915551186, 0.1504683729, 0.7349742531, 0.5780159901]]], dtype=torch.float64)
GOLDEN_GAMMA_GRAD = torch.tensor([-0.5705155230, 0.0135039260], dtype=torch.float64).view(2, 1, 1)


@pytest.mark.points(1.5)
def test_seed_example_keeps_the_input_shape(student, gen):
    x = torch.randn(32, 100, 512, generator=gen)  # the notebook's batch_size, seq_len, d_model
    h = student.decaying_attention.DecayingAttention(embed_dim=512, num_heads=8)
    out = expect_call(lambda: h(x), torch.zeros(32, 100, 512), check_values=False,
                      what="DecayingAttention(512, 8)(x of shape (32, 100, 512))",
                      suspects=decaying_suspects(x, student_params(h), 8))
    expect_finite(out, what="DecayingAttention output")


@pytest.mark.points(3)
def test_matches_known_float64_values_with_one_gamma_per_head(student):
    params, x, _ = golden_case()
    h = student.decaying_attention.DecayingAttention(4, 2)
    student_params(h)
    h.to(dtype=torch.float64)
    h.load_state_dict(params, strict=False)
    expect_call(lambda: h(x), GOLDEN_OUTPUT, what="DecayingAttention(4, 2) with gamma = [0.1, 1.5] on the golden input",
                atol=1e-8, rtol=1e-7, suspects=decaying_suspects(x, params, 2))
    big = (x * 30).float()  # scores of several hundred: exp overflows float32 unless the row max is subtracted
    h.to(dtype=torch.float32)
    p32 = {k: v.float() for k, v in params.items()}
    expect_call(lambda: h(big), decaying_forward(big, p32, 2), what="DecayingAttention on the golden input * 30",
                atol=1e-4, rtol=1e-3, suspects=decaying_suspects(big, p32, 2))


@pytest.mark.points(1.5)
def test_gamma_is_a_parameter_and_gets_the_right_gradient(student):
    h = student.decaying_attention.DecayingAttention(4, 2)
    p = student_params(h)
    expect_tensor(p["gamma"], torch.ones(2, 1, 1), what="gamma of a fresh DecayingAttention(4, 2)",
                  suspects=gamma_init_suspects())
    params, x, g = golden_case()
    h.to(dtype=torch.float64)
    h.load_state_dict(params, strict=False)
    _, _, grads = h.grads(x, grad_output=g)
    got = grads.get("gamma")
    expect(got is not None, f"gamma received no gradient\n  {NOT_LEARNED}")
    expect_tensor(got, GOLDEN_GAMMA_GRAD, what="gradient of gamma (float64, golden input)", atol=1e-8, rtol=1e-7)


@pytest.mark.points(2)
def test_alibi_slopes_for_8_heads(student):
    got = student.decaying_attention.alibi_slopes(8)
    expected = torch.tensor([1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256])
    expect_tensor(got, expected, what="alibi_slopes(8)", suspects=slopes_suspects(8))


@pytest.mark.points(2)
def test_alibi_slopes_for_12_heads(student):
    got = student.decaying_attention.alibi_slopes(12)
    expected = torch.tensor([1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256,
                             0.7071068, 0.3535534, 0.1767767, 0.0883883])
    expect_tensor(got, expected, what="alibi_slopes(12)", suspects=slopes_suspects(12))
