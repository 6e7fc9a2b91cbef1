"""Hidden tests for `decaying_attention`: SDPA oracle with a per-head float bias, gamma's broadcast and
gradient, limiting behaviours (gamma = 0, gamma huge), batch independence, and ALiBi slopes for n = 1..16."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from grader.testing.catalogue.decaying import decaying_suspects, gamma_init_suspects, slopes_suspects
from grader.testing.checks import expect, expect_call, expect_shape, expect_tensor
from grader.testing.devices import expect_on_input_device
from grader.testing.diagnosis import tag
from grader.testing.params import expect_module_grads, params_of, transplant
from grader.testing.regimes import constant_last_feature, expect_stable, shift_heads, unshifted

pytestmark = pytest.mark.exercise("decaying_attention")

OVERFLOW = "outputs become inf or NaN for inputs of ordinary size (a softmax without the max subtracted)"

NAMES_HINT = "self.qkv = nn.Linear(embed_dim, 3 * embed_dim); self.gamma = nn.Parameter(torch.ones(num_heads, 1, 1))"
NOT_LEARNED = tag("gamma-not-parameter", "gamma is not a learnable parameter used in forward (a buffer, a plain "
                  "tensor or a copy never learns): nn.Parameter(torch.ones(num_heads, 1, 1))")


def pair(student, reference, C: int, H: int, gamma: torch.Tensor | None = None):
    """A reference module and a student module with the same parameters; gamma distinct per head by default."""
    ref = reference.decaying_attention.DecayingAttention(C, H)
    with torch.no_grad():
        ref.gamma.copy_(gamma.view(H, 1, 1) if gamma is not None else distinct_gammas(H))
    h = student.decaying_attention.DecayingAttention(C, H)
    transplant(h, ref, hint=NAMES_HINT, defaults={"gamma": torch.ones(1)})
    return ref, h


def distinct_gammas(H: int) -> torch.Tensor:
    perm = torch.randperm(H)  # global RNG, seeded by the `gen` fixture
    return torch.linspace(0.1, 1.5, H)[perm].view(H, 1, 1)




def split(p: dict[str, torch.Tensor], x: torch.Tensor, H: int):
    B, L, C = x.shape
    qkv = F.linear(x, p["qkv.weight"], p["qkv.bias"]).reshape(B, L, 3, H, C // H).permute(2, 0, 3, 1, 4)
    return qkv[0], qkv[1], qkv[2]  # each (B, H, L, hd)


def sdpa_oracle(p: dict[str, torch.Tensor], x: torch.Tensor, H: int) -> torch.Tensor:
    """SDPA (math backend) with the float attn_mask -gamma[h] * |i - j|, added to the SCALED scores."""
    B, L, C = x.shape
    q, k, v = split(p, x, H)
    i = torch.arange(L)
    bias = -p["gamma"].reshape(H, 1, 1) * (i[:, None] - i[None, :]).abs().to(x.dtype)  # (H, L, L)
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH):
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    return o.transpose(1, 2).reshape(B, L, C)


@pytest.mark.points(0.5)
@pytest.mark.parametrize("B,L,C,H", [(2, 5, 8, 2), (2, 4, 8, 4), (3, 7, 12, 3), (2, 9, 12, 2)])
def test_matches_sdpa_with_per_head_distance_bias(student, reference, gen, B, L, C, H):
    ref, h = pair(student, reference, C, H)
    x = torch.randn(B, L, C, generator=gen)
    gammas = [round(g, 3) for g in ref.gamma.view(-1).tolist()]
    p = params_of(ref)
    expect_call(lambda: h(x), sdpa_oracle(p, x, H), suspects=decaying_suspects(x, p, H),
                what=f"DecayingAttention({C}, {H}) on x of shape ({B}, {L}, {C}), gamma = {gammas}")


@pytest.mark.points(1)
def test_fresh_module_has_the_notebooks_parameters(student, gen):
    h = student.decaying_attention.DecayingAttention(12, 3)
    p = h.named_parameters()
    expect("gamma" in p, f"DecayingAttention parameters: got {sorted(p)}, expected a parameter named gamma\n  "
           + NOT_LEARNED)
    expect_tensor(p["gamma"], torch.ones(3, 1, 1), what="gamma of a fresh DecayingAttention(12, 3)",
                  suspects=gamma_init_suspects())
    expect_shape(p.get("qkv.weight"), (36, 12), what="qkv.weight")
    expect_shape(p.get("qkv.bias"), (36,), what="qkv.bias")
    x = torch.randn(2, 5, 12, generator=gen)  # the parameters it reports must be the ones it computes with
    expect_call(lambda: h(x), sdpa_oracle(p, x, 3), what="a fresh DecayingAttention(12, 3) with its own parameters",
                suspects=decaying_suspects(x, p, 3))


@pytest.mark.points(1)
def test_each_head_uses_its_own_gamma(student, reference, gen):
    B, L, C, H = 2, 6, 8, 2
    ref, h = pair(student, reference, C, H, gamma=torch.tensor([0.0, 60.0]))
    x = torch.randn(B, L, C, generator=gen)
    p = params_of(ref)
    out = expect_call(lambda: h(x), sdpa_oracle(p, x, H), what="DecayingAttention with gamma = [0, 60]", atol=1e-4,
                      suspects=decaying_suspects(x, p, H))
    q, k, v = split(p, x, H)
    plain = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(C // H), dim=-1) @ v  # (B, H, L, hd)
    expect_tensor(out[..., :4], plain[:, 0], what="head 0 (gamma = 0): plain softmax attention")
    expect_tensor(out[..., 4:], v[:, 1], what="head 1 (gamma = 60): every token attends only to itself", atol=1e-4)
    for one in (x[:1], x[:, :1]):  # a batch of one, one token per item
        expect_call(lambda one=one: h(one), sdpa_oracle(p, one, H), what=f"DecayingAttention on x {tuple(one.shape)}",
                    atol=1e-4, suspects=decaying_suspects(one, p, H))


@pytest.mark.points(0.75)
def test_huge_gamma_makes_every_token_attend_to_itself(student, reference, gen):
    B, L, C, H = 2, 7, 12, 3
    ref, h = pair(student, reference, C, H, gamma=torch.tensor([80.0, 80.0, 0.5]))
    x = torch.randn(B, L, C, generator=gen)
    p = params_of(ref)
    _, _, v = split(p, x, H)
    out = expect_call(lambda: h(x), sdpa_oracle(p, x, H), what="DecayingAttention with gamma = [80, 80, 0.5]",
                      atol=1e-4, suspects=decaying_suspects(x, p, H))
    expect_tensor(out[..., :8], v[:, :2].transpose(1, 2).reshape(B, L, 8), what="heads 0-1 (gamma = 80)", atol=1e-4)
    # head 2 (gamma = 0.5) is ordinary attention: returning the values alone is not attending
    expect_tensor(out[..., 8:], sdpa_oracle(params_of(ref), x, H)[..., 8:], what="head 2 (gamma = 0.5)")


@pytest.mark.points(0.75)
def test_zero_gamma_is_plain_attention_without_a_mask(student, reference, gen):
    B, L, C, H = 2, 5, 12, 2
    ref, h = pair(student, reference, C, H, gamma=torch.zeros(H))
    x = torch.randn(B, L, C, generator=gen)
    p = params_of(ref)
    q, k, v = split(p, x, H)
    with sdpa_kernel(SDPBackend.MATH):
        expected = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, L, C)
    expect_call(lambda: h(x), expected, what="DecayingAttention with gamma = 0 vs SDPA without any mask",
                suspects=decaying_suspects(x, p, H))


@pytest.mark.points(0.5)
def test_batch_items_are_independent(student, reference, gen):
    ref, h = pair(student, reference, 8, 2)
    x = torch.randn(3, 5, 8, generator=gen)
    p = params_of(ref)
    out = expect_call(lambda: h(x), sdpa_oracle(p, x, 2), what="DecayingAttention(8, 2) on a batch of 3",
                      suspects=decaying_suspects(x, p, 2))
    for b in range(3):
        expect_tensor(out[b:b + 1], h(x[b:b + 1]), what=f"item {b} of a batch vs the same item alone")
    expect_on_input_device(lambda: h.on_meta(x), what="DecayingAttention.forward with the module and x on the meta device")


@pytest.mark.points(1)
def test_float64_gradients_match_reference_including_gamma(student, reference, gen):
    B, L, C, H = 2, 5, 8, 2
    ref, h = pair(student, reference, C, H)
    ref.double()
    h.to(dtype=torch.float64)
    transplant(h, ref, hint=NAMES_HINT, defaults={"gamma": torch.ones(1)})
    x = torch.randn(B, L, C, generator=gen, dtype=torch.float64)
    g = torch.randn(B, L, C, generator=gen, dtype=torch.float64)
    param_grads = dict(h.grads(x, grad_output=g)[2])
    expect(param_grads.get("gamma") is not None, f"gamma received no gradient\n  {NOT_LEARNED}")
    expect(bool(param_grads["gamma"].abs().sum() > 0), "gamma's gradient is all zeros")
    expect_module_grads(h, ref, x, grad_output=g)


def slopes_formula(n: int) -> torch.Tensor:
    """Press et al.'s get_slopes, in float64."""
    def pow2(m: int) -> list[float]:
        start = 2 ** (-(2 ** -(math.log2(m) - 3)))
        return [start * start**i for i in range(m)]

    c = 2 ** math.floor(math.log2(n))
    s = pow2(c) if c == n else pow2(c) + pow2(2 * c)[0::2][: n - c]
    return torch.tensor(s, dtype=torch.float64)


@pytest.mark.points(0.5)
def test_alibi_slopes_are_float32_of_shape_num_heads(student):
    got = student.decaying_attention.alibi_slopes(4)
    expect_tensor(got, torch.tensor([2**-2, 2**-4, 2**-6, 2**-8]), what="alibi_slopes(4)", suspects=slopes_suspects(4))


@pytest.mark.points(0.5)
def test_alibi_slopes_for_12_heads_match_the_paper(student):
    got = student.decaying_attention.alibi_slopes(12)
    expected = torch.tensor([2.0**-k for k in range(1, 9)] + [0.7071068, 0.3535534, 0.1767767, 0.0883883])
    expect_tensor(got, expected, what="alibi_slopes(12)", suspects=slopes_suspects(12))


@pytest.mark.points(1.5)
def test_alibi_slopes_match_the_formula_for_1_to_16_heads(student):
    for n in range(1, 17):
        expected = slopes_formula(n).float()
        expect_tensor(student.decaying_attention.alibi_slopes(n), expected, what=f"alibi_slopes({n})",
                      suspects=slopes_suspects(n))


@pytest.mark.severe(OVERFLOW)
@pytest.mark.points(0.5)
def test_large_inputs_do_not_overflow(student, reference, gen):
    # every score ~150 (grader.testing.regimes): exp overflows, the softmax stays unsaturated on every draw
    ref, h = pair(student, reference, 8, 2)
    w, b = ref.qkv.weight, ref.qkv.bias  # rows [q | k | v], 8 each
    shift_heads(w[:8], w[8:16], 4, b_query=b[:8], b_key=b[8:16])
    transplant(h, ref, hint=NAMES_HINT, defaults={"gamma": torch.ones(1)})
    x = constant_last_feature(torch.randn(2, 6, 8, generator=gen))
    p64 = {k: v.double() for k, v in params_of(ref).items()}
    got = expect_stable(lambda: h(x), lambda: h(unshifted(x)), what="DecayingAttention on scores ~150")
    expect_tensor(got, sdpa_oracle(p64, x.double(), 2).float(), what="DecayingAttention on scores ~150", atol=1e-3,
                  rtol=1e-3, suspects=decaying_suspects(x, params_of(ref), 2))
