"""Public tests for `decaying_attention`: the seed's shapes, a float64 hand computation, gamma's gradient,
and the ALiBi slopes for 8 and 12 heads."""

from __future__ import annotations

import pytest
import torch

from grader.testing.checks import expect, expect_finite, expect_shape, expect_tensor, fail

pytestmark = pytest.mark.exercise("decaying_attention")


def student_params(h) -> dict[str, torch.Tensor]:
    params = h.named_parameters()
    missing = [n for n in ("qkv.weight", "qkv.bias", "gamma") if n not in params]
    if missing:
        fail(f"DecayingAttention parameters: got {sorted(params)}, expected to find {missing}",
             "self.qkv = nn.Linear(embed_dim, 3 * embed_dim); self.gamma = nn.Parameter(torch.ones(num_heads, 1, 1))")
    return params


def hand_oracle(w: torch.Tensor, b: torch.Tensor, gamma: torch.Tensor, x: torch.Tensor, H: int) -> torch.Tensor:
    """The formula written out, one head at a time, in the dtype of the inputs."""
    B, L, C = x.shape
    hd = C // H
    qkv = x @ w.T + b  # (B, L, 3C): [q | k | v], each split into H heads of hd
    i = torch.arange(L)
    dist = (i[:, None] - i[None, :]).abs().to(x.dtype)  # (L, L)
    heads = []
    for h in range(H):
        q = qkv[..., h * hd:(h + 1) * hd]  # (B, L, hd)
        k = qkv[..., C + h * hd:C + (h + 1) * hd]
        v = qkv[..., 2 * C + h * hd:2 * C + (h + 1) * hd]
        scores = q @ k.transpose(1, 2) / hd**0.5 - gamma.reshape(-1)[h] * dist  # (B, L, L)
        heads.append(torch.softmax(scores, dim=-1) @ v)
    return torch.cat(heads, dim=-1)  # (B, L, C)


@pytest.mark.points(1.5)
def test_seed_example_keeps_the_input_shape(student, gen):
    x = torch.randn(32, 100, 512, generator=gen)  # the notebook's batch_size, seq_len, d_model
    h = student.decaying_attention.DecayingAttention(embed_dim=512, num_heads=8)
    out = h(x)
    expect_shape(out, (32, 100, 512), what="DecayingAttention(512, 8)(x of shape (32, 100, 512))")
    expect_finite(out, what="DecayingAttention output")


@pytest.mark.points(3)
def test_matches_float64_hand_computation_with_one_gamma_per_head(student, gen):
    B, L, C, H = 2, 6, 12, 3
    h = student.decaying_attention.DecayingAttention(C, H)
    gamma = torch.tensor([0.1, 0.5, 1.5]).view(H, 1, 1)  # distinct per head: a wrong broadcast shows up
    p = student_params(h)
    h.load_state_dict({"gamma": gamma}, strict=False)
    x = torch.randn(B, L, C, generator=gen)
    expected = hand_oracle(p["qkv.weight"].double(), p["qkv.bias"].double(), gamma.double(), x.double(), H).float()
    expect_tensor(h(x), expected, what="DecayingAttention(12, 3) with gamma = [0.1, 0.5, 1.5]",
                  hint="scores = q @ k^T / sqrt(head_dim) - gamma[h] * |i - j|: subtract AFTER scaling, "
                       "gamma of shape (H, 1, 1) broadcast over (B, H, L, L), absolute distance")


@pytest.mark.points(1.5)
def test_gamma_is_a_parameter_and_gets_the_right_gradient(student, gen):
    B, L, C, H = 2, 5, 8, 2
    h = student.decaying_attention.DecayingAttention(C, H)
    p = student_params(h)
    expect_tensor(p["gamma"], torch.ones(H, 1, 1), what="gamma of a fresh DecayingAttention(8, 2)",
                  hint="nn.Parameter(torch.ones(num_heads, 1, 1))")
    h.to(dtype=torch.float64)
    x = torch.randn(B, L, C, generator=gen, dtype=torch.float64)
    g = torch.randn(B, L, C, generator=gen, dtype=torch.float64)
    _, _, grads = h.grads(x, grad_output=g)
    w, b, gamma = (p[n].double().requires_grad_(True) for n in ("qkv.weight", "qkv.bias", "gamma"))
    hand_oracle(w, b, gamma, x, H).backward(g)
    got = grads.get("gamma")
    expect(got is not None, "gamma received no gradient", "use self.gamma in forward (not a copy or a constant)")
    expect_tensor(got, gamma.grad, what="gradient of gamma (float64)")


@pytest.mark.points(2)
def test_alibi_slopes_for_8_heads(student):
    got = student.decaying_attention.alibi_slopes(8)
    expected = torch.tensor([1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256])
    expect_tensor(got, expected, what="alibi_slopes(8)", hint="for n a power of two: 2 ** (-8 * h / n), h = 1..n")


@pytest.mark.points(2)
def test_alibi_slopes_for_12_heads(student):
    got = student.decaying_attention.alibi_slopes(12)
    expected = torch.tensor([1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256,
                             0.7071068, 0.3535534, 0.1767767, 0.0883883])
    expect_tensor(got, expected, what="alibi_slopes(12)",
                  hint="12 is not a power of two: alibi_slopes(8), then alibi_slopes(16)[0::2][:4]")
