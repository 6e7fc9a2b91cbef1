"""Hidden tests for `multihead_attention`: the wrapper with the grader's stand-in heads, the fused module
against nn.MultiheadAttention and per-head SDPA, causality, dropout, float64 gradients, the divisibility check and
the GPT-2-size parameter count."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from grader.inside.standins import stand_in_head
from grader.protocol.errors import StudentError
from grader.testing.attention import mha_oracle, sdpa_math
from grader.testing.catalogue.modules import mha_suspects, wrapper_suspects
from grader.testing.catalogue.structure import diagnose_structure, expect_structure
from grader.testing.checks import expect, expect_call, expect_shape, expect_tensor, fail
from grader.testing.devices import expect_on_input_device
from grader.testing.diagnosis import tag
from grader.testing.dropout import FixedDropout, expect_new_draw, output_multipliers
from grader.testing.gradients import GRADIENT_SUSPECTS
from grader.testing.oracles import expect_dropout_on_weights, expect_repeatable
from grader.testing.params import expect_grads_of, expect_module_grads, params_of, transplant
from grader.testing.regimes import constant_last_feature, expect_stable, shift_linears, unshifted
from grader.testing.structure import expect_buffer_is_used

pytestmark = pytest.mark.exercise("multihead_attention")

OVERFLOW = "outputs become inf or NaN for inputs of ordinary size (a softmax without the max subtracted)"

NOT_A_BUFFER = tag("not-a-buffer", "the mask is not a registered buffer: a plain attribute is missing from "
                   "state_dict() and stays behind when .to() moves the module")
UNCHECKED = tag("error-unchecked", "an invalid configuration is accepted: check d_out % num_heads == 0 in __init__ "
                "and raise")

PROJECTIONS = ("W_query", "W_key", "W_value")


FUSED_NAMES = "name the layers W_query, W_key, W_value (nn.Linear) and out_proj (nn.Linear with bias)"


def build_fused(student, reference, d_in, d_out, ctx, dropout, num_heads, qkv_bias=False):
    ref = reference.multihead_attention.MultiHeadAttention(d_in, d_out, ctx, dropout, num_heads, qkv_bias)
    h = student.isolated.multihead_attention.MultiHeadAttention(d_in, d_out, ctx, dropout, num_heads, qkv_bias)
    transplant(h, ref, hint=FUSED_NAMES)
    ref.eval()
    h.eval()
    return h, ref


def sdpa_heads_oracle(x: torch.Tensor, p: dict[str, torch.Tensor], num_heads: int) -> torch.Tensor:
    """Per-head causal SDPA (math backend), heads concatenated, then out_proj; works for d_in != d_out."""
    B, T, _ = x.shape
    q, k, v = (F.linear(x, p[f"{n}.weight"], p.get(f"{n}.bias")) for n in PROJECTIONS)  # (B, T, d_out) each
    d_out = q.shape[-1]
    q, k, v = (t.view(B, T, num_heads, d_out // num_heads).transpose(1, 2) for t in (q, k, v))  # (B, H, T, hd)
    o = sdpa_math(q, k, v, is_causal=True)  # (B, H, T, hd)
    o = o.transpose(1, 2).reshape(B, T, d_out)  # (B, T, d_out)
    return F.linear(o, p["out_proj.weight"], p["out_proj.bias"])


def own_params(params: dict[str, torch.Tensor], names: list[str], hint: str) -> dict[str, torch.Tensor]:
    """A student module's own parameters, after checking that the expected names are there."""
    # a missing bias counts as zero here: the structure tests charge its absence, once
    missing = [n for n in names if n not in params and not n.endswith("bias")]
    if missing:
        shapes = {n: tuple(t.shape) for n, t in params.items()}
        said = diagnose_structure(shapes, {**shapes, **{n: () for n in missing}})  # names only: shapes unknown
        fail(f"named_parameters(): your module has no {missing[:6]} (it has {sorted(params)[:6]})"
             + (f"\n  {said}" if said else ""), None if said else hint)
    zeros = {n: torch.zeros(params[n.replace("bias", "weight")].shape[0]) for n in names
             if n not in params and n.replace("bias", "weight") in params}
    return {**params, **zeros}


FUSED_PARAMS = [f"{n}.weight" for n in PROJECTIONS] + ["out_proj.weight", "out_proj.bias"]


# ----------------------------------------------------------------------------------------------- the wrapper
# The exercise is graded on its own: `student.isolated` imports multihead_attention.py with the grader's
# stand-in heads (grader/inside/standins.py) instead of the student's CausalAttention, so a bug there (even
# one that breaks the import) is charged once, in causal_attention. The stand-in keeps CausalAttention's
# arguments and parameter names.

STAND_IN_HINT = ("build every head as CausalAttention(d_in, d_out, context_length, dropout, qkv_bias) from "
                 "causal_attention.py, in self.heads = nn.ModuleList([...]) (to grade the wrapper on its own, the "
                 "grader swaps each head for a stand-in with CausalAttention's arguments and parameters)")


def stand_in_outputs(x: torch.Tensor, p: dict[str, torch.Tensor], num_heads: int) -> list[torch.Tensor]:
    """The stand-in heads' outputs (float64) from the wrapper's parameters `heads.<i>.W_*`, (B, T, d_out) each."""
    x64 = x.double()
    outs = []
    for i in range(num_heads):
        q, k, v = (F.linear(x64, p[f"heads.{i}.{n}.weight"].double(),
                            None if p.get(f"heads.{i}.{n}.bias") is None else p[f"heads.{i}.{n}.bias"].double())
                   for n in PROJECTIONS)  # (B, T, d_out) each
        outs.append(stand_in_head(q, k, v))
    return outs


def stand_in_oracle(x: torch.Tensor, p: dict[str, torch.Tensor], num_heads: int) -> torch.Tensor:
    """The stand-in heads' outputs concatenated, (B, T, H * d_out) in x's dtype."""
    return torch.cat(stand_in_outputs(x, p, num_heads), dim=-1).to(x.dtype)


def wrapped(x: torch.Tensor, p: dict[str, torch.Tensor], num_heads: int, d_out: int):
    """The wrapper's suspects on ``x`` with the parameters ``p``."""
    return wrapper_suspects(lambda: [o.to(x.dtype) for o in stand_in_outputs(x, p, num_heads)], d_out, num_heads)


def stand_in_params(d_in: int, d_out: int, H: int, bias: bool, gen: torch.Generator) -> dict[str, torch.Tensor]:
    names = [f"heads.{i}.{n}.{kind}" for i in range(H) for n in PROJECTIONS for kind in ("weight", "bias")[: 1 + bias]]
    return {name: torch.randn((d_out, d_in) if name.endswith("weight") else (d_out,), generator=gen) / d_in ** 0.5
            for name in names}


def wrapper(student, d_in, d_out, ctx, dropout, H, bias=False):
    build = student.isolated.multihead_attention.MultiHeadAttentionWrapper
    try:
        return build(d_in, d_out, ctx, dropout, num_heads=H, qkv_bias=bias)
    except StudentError as exc:
        if d_out % H == 0:
            raise
        try:  # what it did: refused a d_out num_heads does not divide, and takes one it does?
            build(d_in, H * d_out, ctx, dropout, num_heads=H, qkv_bias=bias)
        except StudentError:
            raise exc from None
        fail(f"MultiHeadAttentionWrapper(d_in={d_in}, d_out={d_out}, num_heads={H}) raised {exc.exc_type}: "
             f"{str(exc).splitlines()[0]}, and builds with d_out={H * d_out}\n  "
             + tag("head-width", "the wrapper's heads each have d_out features (its output has num_heads * d_out): "
                   "d_out is not split among the heads, so it need not be divisible by num_heads"))


def wrapper_expected(h, x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """What the wrapper ``h`` must return for ``x`` with the parameters it reports (no bias)."""
    names = [f"heads.{i}.{n}.weight" for i in range(num_heads) for n in PROJECTIONS]
    return stand_in_oracle(x, own_params(h.named_parameters(), names, STAND_IN_HINT), num_heads)


@pytest.mark.points(0.5)
def test_wrapper_output_has_num_heads_times_d_out_features(student, gen):
    h = wrapper(student, 6, 4, 7, 0.0, 3).eval()
    x = torch.randn(2, 5, 6, generator=gen)
    out = h(x)
    what = "MultiHeadAttentionWrapper(d_in=6, d_out=4, num_heads=3)(x of shape (2, 5, 6))"
    expect_shape(out, (2, 5, 12), what=what, suspects=wrapped(x, h.named_parameters(), 3, 4),
                 expected=torch.zeros(2, 5, 12))
    expect_tensor(out, wrapper_expected(h, x, 3), what=what,
                  suspects=wrapped(x, h.named_parameters(), 3, 4))


WRAPPER_SHAPES = [  # (B, T, ctx, d_in, d_out, H, bias)
    (2, 5, 7, 6, 4, 3, False),
    (3, 4, 4, 3, 2, 2, True),
]


@pytest.mark.points(0.75)
@pytest.mark.parametrize("B,T,ctx,d_in,d_out,H,bias", WRAPPER_SHAPES)
def test_wrapper_concatenates_its_heads_in_order(student, gen, B, T, ctx, d_in, d_out, H, bias):
    params = stand_in_params(d_in, d_out, H, bias, gen)
    h = wrapper(student, d_in, d_out, ctx, 0.0, H, bias).eval()
    params = transplant(h, params, hint=STAND_IN_HINT)
    x = torch.randn(B, T, d_in, generator=gen)
    expect_call(lambda: h(x), stand_in_oracle(x, params, H), suspects=wrapped(x, params, H, d_out),
                what=f"wrapper output ({H} heads, d_in={d_in}, d_out={d_out}, T={T})")


@pytest.mark.points(0.5)
def test_wrapper_parameters_are_per_head(student, gen):
    h = wrapper(student, 5, 3, 6, 0.0, 4, True)
    names = sorted(h.named_parameters())
    expected = sorted(f"heads.{i}.{n}.{kind}" for i in range(4) for n in PROJECTIONS for kind in ("weight", "bias"))
    expect(names == expected, f"named_parameters(): got {names[:8]}{' …' if len(names) > 8 else ''}, "
                              f"expected {expected[:8]} … ({len(expected)} in all)", STAND_IN_HINT)
    x = torch.randn(2, 5, 5, generator=gen)  # the parameters it reports must be the ones it computes with
    h.eval()
    p = h.named_parameters()
    expect_call(lambda: h(x), stand_in_oracle(x, p, 4), what="wrapper output with its own parameters",
                suspects=wrapped(x, p, 4, 3))


@pytest.mark.points(0.5)
def test_wrapper_keeps_token_order_and_causality(student, gen):
    h = wrapper(student, 4, 3, 8, 0.0, 2).eval()
    x = torch.randn(2, 7, 4, generator=gen)
    t = int(torch.randint(1, 7, (1,), generator=gen))
    changed = x.clone()
    changed[:, t:] += 10.0 * torch.randn(2, 7 - t, 4, generator=gen)
    before = expect_call(lambda: h(x), wrapper_expected(h, x, 2), what="wrapper output",
                         suspects=wrapped(x, h.named_parameters(), 2, 3))
    after = h(changed)
    expect_tensor(after[:, :t], before[:, :t], what=f"wrapper outputs of tokens 0..{t - 1} after changing tokens {t}..6")
    for one in (x[:1], x[:, :1]):  # a batch of one, one token per item
        expect_call(lambda one=one: h(one), wrapper_expected(h, one, 2), what=f"wrapper output for x {tuple(one.shape)}",
                    suspects=wrapped(one, h.named_parameters(), 2, 3))


@pytest.mark.points(0.5)
def test_wrapper_passes_dropout_to_its_heads(student, gen):
    """Training mode: each stand-in head drops its gate with probability p and rescales by 1 / (1 - p)."""
    p = 0.3
    h = wrapper(student, 4, 4, 6, p, 2)
    x = torch.randn(16, 6, 4, generator=gen)  # 768 gates: a fair draw stays within 5 sigma (8 points) of p
    clean = h.eval()(x)
    expect_repeatable(h(x), clean, what="two eval-mode calls (dropout=0.3)")
    expect_tensor(clean, wrapper_expected(h, x, 2), what="eval-mode wrapper output with dropout=0.3 vs no dropout",
                  suspects=wrapped(x, h.named_parameters(), 2, 4))
    noisy = h.train()(x)
    kept = (noisy - clean / (1 - p)).abs() <= 1e-5 + 1e-4 * (clean / (1 - p)).abs()
    dropped = noisy == 0
    expect(bool((kept | dropped).all()), "training-mode wrapper output: some values are neither dropped nor the "
           "eval value / (1 - p)")
    rate = float(dropped.double().mean())
    # 5 sigma of the 768 gates: a fair draw never fails (4 sequences and a fixed 12-point band once failed the reference)
    band = 5 * (p * (1 - p) / dropped.numel()) ** 0.5
    expect(abs(rate - p) <= band, f"training-mode wrapper output: got {rate:.0%} dropped, expected about {p:.0%} "
           f"(dropout={p})")


@pytest.mark.points(0.5)
def test_wrapper_float64_gradients_match_the_stand_in_heads(student, gen):
    params = {k: v.double() for k, v in stand_in_params(4, 3, 2, True, gen).items()}
    h = wrapper(student, 4, 3, 6, 0.0, 2, True)
    h.to(dtype=torch.float64)
    params = transplant(h, params, hint=STAND_IN_HINT)
    h.eval()
    x = torch.randn(2, 5, 4, generator=gen, dtype=torch.float64)
    g = torch.randn(2, 5, 6, generator=gen, dtype=torch.float64)
    out, (gx,), pgrads = h.grads(x, grad_output=g)
    leaf = x.clone().requires_grad_(True)
    leaves = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    expected = stand_in_oracle(leaf, leaves, 2)
    (expected * g).sum().backward()  # = expected.backward(g), which imports sympy (0.5 s) on first use
    expect_tensor(out, expected.detach(), what="float64 wrapper output", suspects=wrapped(x, params, 2, 3))
    expect_tensor(gx, leaf.grad, what="gradient of the input x", suspects=GRADIENT_SUSPECTS)
    for name, leaf_param in leaves.items():
        expect_tensor(pgrads.get(name), leaf_param.grad, what=f"gradient of {name}", suspects=GRADIENT_SUSPECTS)


# ----------------------------------------------------------------------------------------------- the fused module

MHA_SHAPES = [  # (B, T, ctx, d, H, bias): d_in == d_out, so nn.MultiheadAttention is an oracle
    (2, 5, 8, 8, 2, False),  # T < context_length, head_dim 4
    (3, 6, 6, 8, 4, True),  # head_dim 2
]


@pytest.mark.points(1.25)
@pytest.mark.parametrize("B,T,ctx,d,H,bias", MHA_SHAPES)
def test_fused_matches_nn_multiheadattention(student, reference, gen, B, T, ctx, d, H, bias):
    h, ref = build_fused(student, reference, d, d, ctx, 0.0, H, bias)
    x = torch.randn(B, T, d, generator=gen)
    p = params_of(ref)
    expect_call(lambda: h(x), mha_oracle(p, H, x, causal=True), suspects=mha_suspects(x, p, H, context_length=ctx),
                what=f"output vs nn.MultiheadAttention (d={d}, {H} heads, T={T}, context_length={ctx})")


SDPA_SHAPES = [  # (B, T, ctx, d_in, d_out, H, bias): d_in != d_out
    (2, 5, 7, 6, 8, 2, False),
    (2, 4, 4, 5, 12, 3, True),
]


@pytest.mark.points(0.25)
@pytest.mark.parametrize("bias", [False, True])
def test_fused_parameters_are_the_projections_and_out_proj(student, gen, bias):
    # the structure is checked here once; value tests transplant the reference's weights (grader/testing/params.py)
    h = student.isolated.multihead_attention.MultiHeadAttention(6, 8, 7, 0.0, num_heads=2, qkv_bias=bias)
    params = h.named_parameters()
    got = {k: tuple(v.shape) for k, v in params.items()}
    expected = {f"{n}.{kind}": shape for n in PROJECTIONS for kind, shape in (("weight", (8, 6)), ("bias", (8,)))[: 1 + bias]}
    expected.update({"out_proj.weight": (8, 8), "out_proj.bias": (8,)})
    expect_structure(got, expected, what=f"named_parameters() of MultiHeadAttention(6, 8, 7, 0.0, 2, qkv_bias={bias})")
    x = torch.randn(2, 5, 6, generator=gen)
    expect_call(lambda: h.eval()(x), sdpa_heads_oracle(x, params, 2), what="MultiHeadAttention with its own parameters",
                suspects=mha_suspects(x, params, 2, context_length=7))


@pytest.mark.points(0.75)
@pytest.mark.parametrize("B,T,ctx,d_in,d_out,H,bias", SDPA_SHAPES)
def test_fused_matches_per_head_sdpa(student, reference, gen, B, T, ctx, d_in, d_out, H, bias):
    h, ref = build_fused(student, reference, d_in, d_out, ctx, 0.0, H, bias)
    x = torch.randn(B, T, d_in, generator=gen)
    p = params_of(ref)
    expect_call(lambda: h(x), sdpa_heads_oracle(x, p, H), suspects=mha_suspects(x, p, H, context_length=ctx),
                what=f"output vs per-head F.scaled_dot_product_attention (d_in={d_in}, d_out={d_out}, {H} heads)")


@pytest.mark.points(1)
def test_fused_is_causal(student, reference, gen):
    h, ref = build_fused(student, reference, 6, 8, 9, 0.0, 4)
    T = 8
    x = torch.randn(2, T, 6, generator=gen)
    t = int(torch.randint(1, T, (1,), generator=gen))
    changed = x.clone()
    changed[:, t:] += 10.0 * torch.randn(2, T - t, 6, generator=gen)
    p = params_of(ref)
    before = expect_call(lambda: h(x), sdpa_heads_oracle(x, p, 4), what="output (6 -> 8, 4 heads, T = 8)",
                         suspects=mha_suspects(x, p, 4, context_length=9))
    after = h(changed)
    expect_tensor(after[:, :t], before[:, :t], what=f"outputs of tokens 0..{t - 1} after changing tokens {t}..{T - 1}")
    for one in (x[:1], x[:, :1]):  # a batch of one, one token per item
        expect_call(lambda one=one: h(one), sdpa_heads_oracle(one, p, 4), what=f"output for x {tuple(one.shape)}",
                    suspects=mha_suspects(one, p, 4, context_length=9))
    expect_on_input_device(lambda: h.on_meta(x), what="MultiHeadAttention.forward with the module and x on the meta device")


@pytest.mark.points(0.75)
def test_fused_eval_mode_is_deterministic_and_ignores_dropout(student, reference, gen):
    h, ref = build_fused(student, reference, 8, 8, 6, 0.5, 2)
    x = torch.randn(2, 6, 8, generator=gen)
    first, second = h(x), h(x)
    expect_shape(first, (2, 6, 8), what="output")
    expect_repeatable(first, second, what="two eval-mode calls (dropout=0.5)")
    p = params_of(ref)
    expect_tensor(first, mha_oracle(p, 2, x, causal=True), what="eval-mode output with dropout=0.5 vs no dropout",
                  suspects=mha_suspects(x, p, 2))


def fused_weights64(x: torch.Tensor, p: dict[str, torch.Tensor], num_heads: int) -> torch.Tensor:
    """Causal attention weights of every head by hand in float64, (B, H, T, T)."""
    B, T, _ = x.shape
    q, k = (F.linear(x.double(), p[f"{n}.weight"].double(), None if p.get(f"{n}.bias") is None
                     else p[f"{n}.bias"].double()).view(B, T, num_heads, -1).transpose(1, 2)
            for n in ("W_query", "W_key"))
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    return torch.softmax(scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")), dim=-1)


@pytest.mark.points(0.5)
@pytest.mark.parametrize("p", [0.1, 0.3])  # not 0.5 alone: there 1/p == 1/(1-p) and keep == drop probability
def test_fused_dropout_acts_on_the_attention_weights(student, reference, gen, p):
    H, T, B, d = 2, 4, 32, 16  # head_dim 8 >> T: each head's value rows are independent and well-conditioned
    h, ref = build_fused(student, reference, 6, d, 6, p, H, True)
    ref.double()
    h.to(dtype=torch.float64)
    params = params_of(ref)
    x = torch.randn(B, T, 6, generator=gen, dtype=torch.float64)
    with torch.no_grad():
        expect_call(lambda: h(x), ref(x), what=f"eval-mode output with dropout={p}",
                    suspects=mha_suspects(x, params, H, context_length=6))
    g = torch.randn(B, T, d, generator=gen, dtype=torch.float64)
    got = h.train().grads(x, grad_output=g)  # forward and backward: an in-place dropout breaks the backward
    out = got[0]
    expect_shape(out, (B, T, d), what="training-mode output")
    # undo out_proj (out = z W_o^T + b_o), then split z into heads: z_h = dropout(weights_h) @ values_h
    z = torch.linalg.solve(params["out_proj.weight"], (out - params["out_proj.bias"]).transpose(-2, -1))
    z = z.transpose(-2, -1)
    heads = z.reshape(B, T, H, d // H).transpose(1, 2)
    values = F.linear(x, params["W_value.weight"], params["W_value.bias"]).view(B, T, H, d // H).transpose(1, 2)
    weights = fused_weights64(x, params, H)
    expect_dropout_on_weights(heads, weights, values, p, what="training-mode output, before out_proj, per head")
    expect_new_draw(out, h(x), what=f"MultiHeadAttention(dropout={p}).train()(x)")
    ref.dropout = FixedDropout(output_multipliers(heads, weights, values, p))  # the reference with your draw
    expect_grads_of(got, ref, x, grad_output=g, what="training-mode output (with your own dropout draw)")


@pytest.mark.points(1)
def test_fused_float64_values_and_gradients_match_the_reference(student, reference, gen):
    h, ref = build_fused(student, reference, 6, 8, 7, 0.0, 2, True)
    ref.double()
    h.to(dtype=torch.float64)
    x = torch.randn(2, 5, 6, generator=gen, dtype=torch.float64)
    g = torch.randn(2, 5, 8, generator=gen, dtype=torch.float64)
    expect_module_grads(h, ref, x, grad_output=g)


@pytest.mark.points(0.75)
def test_fused_rejects_d_out_not_divisible_by_num_heads(student, gen):
    ok = student.isolated.multihead_attention.MultiHeadAttention(4, 12, 5, 0.0, num_heads=3)
    ok.eval()
    x = torch.randn(2, 3, 4, generator=gen)
    own = own_params(ok.named_parameters(), FUSED_PARAMS, FUSED_NAMES)
    expect_tensor(ok(x), sdpa_heads_oracle(x, own, 3), what="MultiHeadAttention(4, 12, num_heads=3) with its own parameters")
    for d_out, heads in ((10, 4), (6, 4)):
        with pytest.raises(StudentError) as info:
            student.isolated.multihead_attention.MultiHeadAttention(4, d_out, 5, 0.0, num_heads=heads)
            fail(f"MultiHeadAttention(d_out={d_out}, num_heads={heads}) was built without an error, expected one\n  "
                 + UNCHECKED)
        expect(info.value.kind != "not_implemented", f"got {info.value.message}, expected an error about d_out % num_heads")


@pytest.mark.points(0.5)
def test_gpt2_size_parameter_count_and_mask_buffer(student, gen):
    # rasbt Exercise 3.3: d_in = d_out = 768, 12 heads, context 1024 -> 2,360,064 trainable parameters.
    h = student.isolated.multihead_attention.MultiHeadAttention(768, 768, 1024, 0.0, num_heads=12)
    params = h.named_parameters()
    count = sum(t.numel() for t in params.values())
    buffers = h.named_buffers()
    expect("mask" in buffers, f"named_buffers(): got {sorted(buffers)}, expected a 'mask' entry\n  {NOT_A_BUFFER}")
    expect(count == 2_360_064, f"parameter count: got {count:,}, expected 2,360,064" + (
        "\n  " + tag("out-proj-bias", "768 parameters short: out_proj has no bias") if count == 2_360_064 - 768 else ""))
    h.eval()  # a module that only reports this structure earns nothing: it must also attend with it
    x = torch.randn(1, 5, 768, generator=gen)
    expect_tensor(h(x), sdpa_heads_oracle(x, own_params(params, FUSED_PARAMS, FUSED_NAMES), 12),
                  what="the GPT-2-size module on x of shape (1, 5, 768)", atol=1e-4)
    expect_buffer_is_used(h, "mask", x, what="the GPT-2-size module",
                          hint="attend with self.mask (the registered buffer), not with a copy kept elsewhere")


@pytest.mark.severe(OVERFLOW)
@pytest.mark.points(0.5)
def test_fused_large_inputs_do_not_overflow(student, reference, gen):
    # every score ~150 (grader.testing.regimes): exp overflows, the softmax stays unsaturated on every draw
    h, ref = build_fused(student, reference, 6, 8, 8, 0.0, 2, True)
    shift_linears(ref.W_query, ref.W_key, 4)
    transplant(h, ref, hint=FUSED_NAMES)
    x = constant_last_feature(torch.randn(2, 7, 6, generator=gen))
    p64 = {k: v.double() for k, v in params_of(ref).items()}
    got = expect_stable(lambda: h(x), lambda: h(unshifted(x)), what="MultiHeadAttention on scores ~150")
    expect_tensor(got, sdpa_heads_oracle(x.double(), p64, 2).float(), what="MultiHeadAttention on scores ~150",
                  atol=1e-3, rtol=1e-3, suspects=mha_suspects(x, params_of(ref), 2))
