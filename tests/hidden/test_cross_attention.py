"""Hidden tests for `cross_attention`: nn.MultiheadAttention and SDPA oracles with L != S, padding masks
per batch item, no mixing between queries, the attention weights themselves, dropout, float64 gradients."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from grader.testing.attention import mha_oracle
from grader.testing.catalogue.heads import Spec, forward
from grader.testing.catalogue.modules import cross_suspects
from grader.testing.catalogue.structure import expect_structure
from grader.testing.checks import expect_call, expect_shape, expect_tensor
from grader.testing.devices import expect_on_input_device
from grader.testing.dropout import FixedDropout, expect_new_draw, output_multipliers
from grader.testing.oracles import expect_dropout_on_weights, expect_repeatable
from grader.testing.params import expect_grads_of, expect_module_grads, params_of, transplant
from grader.testing.regimes import constant_last_feature, expect_stable, shift_linears, unshifted

pytestmark = pytest.mark.exercise("cross_attention")

OVERFLOW = "outputs become inf or NaN for inputs of ordinary size (a softmax without the max subtracted)"

NAMES_HINT = ("use W_query, W_key, W_value (nn.Linear(d_model, d_model, bias=qkv_bias)) and out_proj "
             "(nn.Linear(d_model, d_model)) as attribute names")


def pair(student, reference, d_model: int, num_heads: int, **kwargs):
    """A reference module and a student module holding the same parameters (parameters only, never buffers)."""
    ref = reference.cross_attention.CrossAttention(d_model, num_heads, **kwargs)
    h = student.cross_attention.CrossAttention(d_model, num_heads, **kwargs)
    transplant(h, ref, hint=NAMES_HINT)
    h.eval()
    ref.eval()
    return ref, h




def sdpa_oracle(p: dict[str, torch.Tensor], num_heads: int, x: torch.Tensor, context: torch.Tensor,
                keep: torch.Tensor | None = None) -> torch.Tensor:
    """The math backend of SDPA; its bool attn_mask means True = attend, broadcast as (B, 1, 1, S)."""
    B, L, d = x.shape
    S, hd = context.shape[1], d // num_heads
    q = F.linear(x, p["W_query.weight"], p.get("W_query.bias")).view(B, L, num_heads, hd).transpose(1, 2)
    k = F.linear(context, p["W_key.weight"], p.get("W_key.bias")).view(B, S, num_heads, hd).transpose(1, 2)
    v = F.linear(context, p["W_value.weight"], p.get("W_value.bias")).view(B, S, num_heads, hd).transpose(1, 2)
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH):
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=None if keep is None else keep[:, None, None, :])
    return F.linear(o.transpose(1, 2).reshape(B, L, d), p["out_proj.weight"], p["out_proj.bias"])


def lengths_mask(lengths: list[int], S: int) -> torch.Tensor:
    return torch.arange(S)[None, :] < torch.tensor(lengths)[:, None]  # (B, S): True = real token


def weights_probe(student, reference, B: int, L: int, S: int, H: int, dropout: float, gen):
    """A student module whose output IS its attention weights, shape (B, H, L, S).

    d_model = H * S and context[b, j] = e_j: W_value copies e_j into every head (value j of each head is the
    one-hot e_j) and out_proj is the identity, so output[b, i, h * S + j] = weight of head h, query i, key j.
    Queries and keys keep the reference's random projections. Returns (handle, x, context, expected eval weights).
    """
    d = H * S
    ref = reference.cross_attention.CrossAttention(d, H, dropout=dropout)
    p = params_of(ref)
    eye = torch.eye(S, d)  # (S, d): e_j in the first S coordinates
    p["W_value.weight"] = torch.cat([torch.eye(S, d)] * H)  # (d, d): every head's value j is e_j
    p["out_proj.weight"] = torch.eye(d)
    p["out_proj.bias"] = torch.zeros(d)
    h = student.cross_attention.CrossAttention(d, H, dropout=dropout)
    p = transplant(h, p, hint=NAMES_HINT)
    x = torch.randn(B, L, d, generator=gen)
    context = eye.expand(B, S, d).clone()
    q = (x.double() @ p["W_query.weight"].double().T).view(B, L, H, S).transpose(1, 2)  # (B, H, L, hd = S)
    k = (context.double() @ p["W_key.weight"].double().T).view(B, S, H, S).transpose(1, 2)  # (B, H, S, hd)
    expected = torch.softmax(q @ k.transpose(-2, -1) / S**0.5, dim=-1).float()  # (B, H, L, S)
    return h, x, context, expected


def cross_oracle64(x: torch.Tensor, context: torch.Tensor, p: dict[str, torch.Tensor], H: int,
                   keep: torch.Tensor) -> torch.Tensor:
    """The module's output by formula in float64 (padded keys blocked), cast to x's dtype."""
    return forward(x, p, Spec(heads=H), context=context, keep=keep)


def as_weights(out, B: int, L: int, S: int, H: int) -> torch.Tensor:
    expect_shape(out, (B, L, H * S), what="CrossAttention output")
    return out.view(B, L, H, S).transpose(1, 2)  # (B, H, L, S)


@pytest.mark.points(0.5)
@pytest.mark.parametrize("B,L,S,d,H", [(2, 3, 5, 8, 2), (2, 6, 2, 12, 4), (1, 1, 4, 6, 3)])  # last: one sequence, one query
def test_matches_multihead_attention_oracle(student, reference, gen, B, L, S, d, H):
    ref, h = pair(student, reference, d, H)
    x, context = torch.randn(B, L, d, generator=gen), torch.randn(B, S, d, generator=gen)
    p = params_of(ref)
    expect_call(lambda: h(x, context), mha_oracle(p, H, x, context), suspects=cross_suspects(x, context, p, H),
                what=f"CrossAttention({d}, {H}) on x (B={B}, L={L}) and context (S={S}) vs nn.MultiheadAttention")


@pytest.mark.points(0.75)
@pytest.mark.parametrize("B,L,S,d,H,lengths", [(2, 3, 5, 8, 2, [5, 2]), (3, 4, 6, 12, 3, [6, 1, 3])])
def test_key_padding_mask_matches_sdpa(student, reference, gen, B, L, S, d, H, lengths):
    ref, h = pair(student, reference, d, H)
    x, context = torch.randn(B, L, d, generator=gen), torch.randn(B, S, d, generator=gen)
    keep = lengths_mask(lengths, S)
    p = params_of(ref)
    expect_call(lambda: h(x, context, keep), sdpa_oracle(p, H, x, context, keep), suspects=cross_suspects(
        x, context, p, H, keep), what=f"CrossAttention with key_padding_mask for context lengths {lengths} (S={S})")


@pytest.mark.points(0.25)
@pytest.mark.parametrize("bias", [False, True])
def test_parameters_are_the_four_projections(student, gen, bias):
    # the structure is checked here once; value tests transplant the reference's weights (grader/testing/params.py)
    h = student.cross_attention.CrossAttention(8, 2, qkv_bias=bias)
    params = h.named_parameters()
    got = {k: tuple(v.shape) for k, v in params.items()}
    expected = {f"{n}.{kind}": shape for n in ("W_query", "W_key", "W_value")
                for kind, shape in (("weight", (8, 8)), ("bias", (8,)))[: 1 + bias]}
    expected.update({"out_proj.weight": (8, 8), "out_proj.bias": (8,)})
    expect_structure(got, expected, what=f"named_parameters() of CrossAttention(8, 2, qkv_bias={bias})")
    x, context = torch.randn(2, 3, 8, generator=gen), torch.randn(2, 5, 8, generator=gen)
    expect_call(lambda: h.eval()(x, context), sdpa_oracle(params, 2, x, context),
                what="CrossAttention with its own parameters", suspects=cross_suspects(x, context, params, 2))


@pytest.mark.points(0.5)
def test_qkv_bias_matches_multihead_attention(student, reference, gen):
    ref, h = pair(student, reference, 8, 2, qkv_bias=True)
    p = params_of(ref)
    expect_structure({n: (1,) for n in h.named_parameters() if n.startswith("W_query")},
                     {"W_query.weight": (1,), "W_query.bias": (1,)}, what="W_query's parameters with qkv_bias=True")
    x, context = torch.randn(2, 4, 8, generator=gen), torch.randn(2, 3, 8, generator=gen)
    keep = lengths_mask([2, 3], 3)
    expect_call(lambda: h(x, context, keep), mha_oracle(p, 2, x, context, keep=keep),
                what="CrossAttention(8, 2, qkv_bias=True) with a padding mask vs nn.MultiheadAttention",
                suspects=cross_suspects(x, context, p, 2, keep))


@pytest.mark.points(1)
def test_padded_context_has_no_influence(student, reference, gen):
    ref, h = pair(student, reference, 8, 2)
    x, context = torch.randn(2, 3, 8, generator=gen), torch.randn(2, 6, 8, generator=gen)
    keep = lengths_mask([4, 6], 6)
    # the property alone would pay a constant output: anchor it to the oracle first
    p = params_of(ref)
    out = expect_call(lambda: h(x, context, keep), sdpa_oracle(p, 2, x, context, keep),
                      what="CrossAttention with lengths [4, 6]", suspects=cross_suspects(x, context, p, 2, keep))
    noisy = context.clone()
    noisy[~keep] = 10 * torch.randn(int((~keep).sum()), 8, generator=gen)
    expect_tensor(h(x, noisy, keep), out, what="output after replacing the padded context tokens by noise")
    expect_on_input_device(lambda: h.on_meta(x, context, keep), what="CrossAttention.forward with the module, x, context and "
                           "the mask on the meta device")


@pytest.mark.points(1)
def test_queries_do_not_mix(student, reference, gen):
    ref, h = pair(student, reference, 12, 3)
    x, context = torch.randn(2, 5, 12, generator=gen), torch.randn(2, 4, 12, generator=gen)
    keep = lengths_mask([4, 2], 4)
    p = params_of(ref)
    out = expect_call(lambda: h(x, context, keep), sdpa_oracle(p, 3, x, context, keep),
                      what="CrossAttention(12, 3) with lengths [4, 2]", suspects=cross_suspects(x, context, p, 3, keep))
    j = 3
    changed = x.clone()
    changed[:, j] += 3 * torch.randn(2, 12, generator=gen)
    out2 = h(changed, context, keep)
    others = [i for i in range(5) if i != j]
    expect_tensor(out2[:, others], out[:, others], what=f"output rows {others} after changing query token {j}")


@pytest.mark.points(1)
def test_attention_weights_are_a_distribution_over_real_keys(student, reference, gen):
    B, L, S, H = 2, 3, 4, 2
    h, x, context, expected = weights_probe(student, reference, B, L, S, H, 0.0, gen)
    h.eval()
    keep = lengths_mask([4, 2], S)
    p = h.named_parameters()
    out = expect_call(lambda: h(x, context, keep), cross_oracle64(x, context, p, H, keep), atol=1e-5,
                      what="output (= the attention weights, values one-hot and out_proj the identity)",
                      suspects=cross_suspects(x, context, p, H, keep))
    w = as_weights(out, B, L, S, H)
    expect_tensor(w[0], expected[0],
                  what="attention weights of item 0 (no padding) vs float64 softmax(q k^T / sqrt(hd))")


@pytest.mark.points(0.5)
def test_dropout_is_off_in_eval_mode(student, reference, gen):
    ref, h = pair(student, reference, 8, 2, dropout=0.5)
    x, context = torch.randn(2, 3, 8, generator=gen), torch.randn(2, 5, 8, generator=gen)
    a, b = h(x, context), h(x, context)
    expect_repeatable(a, b, what="two eval-mode calls of CrossAttention(dropout=0.5)")
    p = params_of(ref)
    expect_tensor(a, mha_oracle(p, 2, x, context), what="eval-mode output with dropout=0.5",
                  suspects=cross_suspects(x, context, p, 2))


@pytest.mark.points(0.5)
@pytest.mark.parametrize("p", [0.1, 0.3])  # not 0.5 alone: there 1/p == 1/(1-p) and keep == drop probability
def test_dropout_in_training_acts_on_the_attention_weights(student, reference, gen, p):
    B, L, S, d, H = 16, 4, 5, 24, 2  # head_dim 12 >> S: each head's value rows are independent, well-conditioned
    ref, h = pair(student, reference, d, H, dropout=p, qkv_bias=True)
    ref.double()
    h.to(dtype=torch.float64)
    prm = params_of(ref)
    x = torch.randn(B, L, d, generator=gen, dtype=torch.float64)
    context = torch.randn(B, S, d, generator=gen, dtype=torch.float64)
    keep = lengths_mask([5, 3] * (B // 2), S)
    expect_call(lambda: h(x, context, keep), sdpa_oracle(prm, H, x, context, keep), what=f"eval-mode output, "
                f"dropout={p}", suspects=cross_suspects(x, context, prm, H, keep))
    g = torch.randn(B, L, d, generator=gen, dtype=torch.float64)
    got = h.train().grads(x, context, keep, grad_output=g)  # forward and backward: an in-place dropout breaks it
    out = got[0]
    expect_shape(out, (B, L, d), what="training-mode output")
    # undo out_proj (out = z W_o^T + b_o), then split z into heads: z_h = dropout(weights_h) @ values_h
    z = torch.linalg.solve(prm["out_proj.weight"], (out - prm["out_proj.bias"]).transpose(-2, -1)).transpose(-2, -1)
    q = F.linear(x, prm["W_query.weight"], prm["W_query.bias"]).view(B, L, H, d // H).transpose(1, 2)
    k, v = (F.linear(context, prm[f"{n}.weight"], prm[f"{n}.bias"]).view(B, S, H, d // H).transpose(1, 2)
            for n in ("W_key", "W_value"))
    scores = (q @ k.transpose(-2, -1) / (d // H) ** 0.5).masked_fill(~keep[:, None, None, :], float("-inf"))
    heads, weights = z.reshape(B, L, H, d // H).transpose(1, 2), torch.softmax(scores, dim=-1)
    expect_dropout_on_weights(heads, weights, v, p, what="training-mode output, before out_proj, per head")
    expect_new_draw(out, h(x, context, keep), what=f"CrossAttention(dropout={p}).train()(x, context, mask)")
    ref.dropout = FixedDropout(output_multipliers(heads, weights, v, p))  # the reference with your draw
    expect_grads_of(got, ref, x, context, keep, grad_output=g, names=("x", "context"),
                    what="training-mode output (with your own dropout draw)")


@pytest.mark.points(1)
def test_float64_gradients_match_reference(student, reference, gen):
    B, L, S, d, H = 2, 3, 5, 8, 2
    ref = reference.cross_attention.CrossAttention(d, H, qkv_bias=True).double()
    h = student.cross_attention.CrossAttention(d, H, qkv_bias=True)
    h.to(dtype=torch.float64)
    transplant(h, ref, hint=NAMES_HINT)
    h.eval()
    ref.eval()
    x = torch.randn(B, L, d, generator=gen, dtype=torch.float64)
    context = torch.randn(B, S, d, generator=gen, dtype=torch.float64)
    keep = lengths_mask([3, 5], S)
    g = torch.randn(B, L, d, generator=gen, dtype=torch.float64)
    expect_module_grads(h, ref, x, context, keep, grad_output=g, names=("x", "context"))


@pytest.mark.severe(OVERFLOW)
@pytest.mark.points(0.5)
def test_large_inputs_do_not_overflow(student, reference, gen):
    # every score ~150 (grader.testing.regimes): exp overflows, the softmax stays unsaturated on every draw
    ref, h = pair(student, reference, 8, 2)
    shift_linears(ref.W_query, ref.W_key, 4)
    transplant(h, ref, hint=NAMES_HINT)
    x, context = (constant_last_feature(torch.randn(2, n, 8, generator=gen)) for n in (4, 5))
    keep = lengths_mask([5, 3], 5)
    p64 = {k: v.double() for k, v in params_of(ref).items()}
    got = expect_stable(lambda: h(x, context, keep), lambda: h(unshifted(x), unshifted(context), keep),
                        what="CrossAttention on scores ~150")
    expect_tensor(got, sdpa_oracle(p64, 2, x.double(), context.double(), keep).float(),
                  what="CrossAttention on scores ~150", atol=1e-3, rtol=1e-3,
                  suspects=cross_suspects(x, context, params_of(ref), 2, keep))
