"""Hidden tests for `grouped_query_attention`, graded on its own (`student.isolated`: rope.py's functions are the
grader's stand-ins): structure and parameter counts, SDPA with `enable_gqa=True` (GQA, MQA, MHA) on transplanted
reference weights, nn.MultiheadAttention, float64 values and gradients by hand, RoPE on q and k only (base and
max_len passed on; the tables are buffers of max_len rows), causality and the meta device, dropout on the weights,
refusals, overflow, float16 and bfloat16, CUDA."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from grader.inside.standins import stand_in_apply_rope, stand_in_rope_frequencies
from grader.testing.attention import mha_oracle, sdpa_math
from grader.testing.catalogue.modules import gqa_suspects
from grader.testing.catalogue.structure import expect_structure
from grader.testing.checks import at_the_limit, expect, expect_call, expect_raises, expect_shape, expect_tensor
from grader.testing.devices import expect_on_input_device
from grader.testing.diagnosis import Suspects, Variant, tag
from grader.testing.dropout import FixedDropout, expect_new_draw, output_multipliers
from grader.testing.gradients import GRADIENT_SUSPECTS, no_gradient, oracle_grads
from grader.testing.oracles import expect_dropout_on_weights, expect_repeatable
from grader.testing.params import expect_grads_of, params_of, transplant
from grader.testing.precision import expect_no_worse_than
from grader.testing.regimes import expect_stable

pytestmark = pytest.mark.exercise("grouped_query_attention")

LAYERS = ("W_query", "W_key", "W_value", "out_proj")
NAMES_HINT = ("name the layers W_query (d_model -> d_model), W_key and W_value (d_model -> num_kv_heads * head_dim) "
              "and out_proj (d_model -> d_model), all nn.Linear(..., bias=bias)")
GROUP_HINT = ("query head h uses kv head h // (num_heads // num_kv_heads): k.repeat_interleave(group, dim=1), "
              "not k.repeat(1, group, 1, 1) (which pairs head h with kv head h % num_kv_heads)")
ROPE_HINT = ("graded with the grader's stand-in rope.py (position dependent, not RoPE): in __init__ "
             "self.rope_cos, self.rope_sin = rope_frequencies(head_dim, max_len, rope_base) as buffers; in forward, "
             "after splitting the heads into (B, H, T, hd): apply_rope(q, ...) and apply_rope(k, ...), never v")
OVERFLOW = "outputs become inf or NaN for inputs of ordinary size (a softmax without the max subtracted)"


def table_suspects(kwargs, which: int) -> Suspects:
    """The RoPE buffer ``which`` (0: cos, 1: sin)'s suspects: a fixed 4096 rows, or base 10000."""
    max_len, base = kwargs.get("max_len", 2048), kwargs.get("rope_base", 10000.0)
    return Suspects((Variant("rope-tables-length", "tables of 4096 rows (Llama 2's context) whatever max_len is",
                             lambda: stand_in_rope_frequencies(4, 4096, base)[which]),
                     Variant("rope-base-ignored", "tables built with base 10000 whatever rope_base is",
                             lambda: stand_in_rope_frequencies(4, max_len, 10000.0)[which])))


def build(student, reference, d, H, Hkv, dropout=0.0, bias=False, **kw):
    """The student's module (isolated from rope.py) holding the reference's weights, and the reference."""
    ref = reference.grouped_query_attention.GroupedQueryAttention(d, H, Hkv, dropout, bias, **kw)
    h = student.isolated.grouped_query_attention.GroupedQueryAttention(d, H, Hkv, dropout, bias, **kw)
    params = transplant(h, ref, hint=NAMES_HINT)
    ref.eval()
    h.eval()
    return h, params


def project(x: torch.Tensor, p: dict[str, torch.Tensor], H: int, Hkv: int, rope: tuple[int, float] | None):
    """q (B, H, T, hd), k and v (B, Hkv, T, hd) from the parameters, q and k turned by the stand-in rope."""
    B, T, d = x.shape
    hd = d // H
    q, k, v = (F.linear(x, p[f"{n}.weight"], p.get(f"{n}.bias")) for n in LAYERS[:3])
    q = q.view(B, T, H, hd).transpose(1, 2)
    k, v = (t.view(B, T, Hkv, hd).transpose(1, 2) for t in (k, v))
    if rope is not None:
        tables = [t.to(x.dtype) for t in stand_in_rope_frequencies(hd, *rope)]  # float32 buffers, then .to()
        q, k = stand_in_apply_rope(q, *tables), stand_in_apply_rope(k, *tables)
    return q, k, v


def gqa_oracle(x: torch.Tensor, p: dict[str, torch.Tensor], H: int, Hkv: int,
               rope: tuple[int, float] | None = None) -> torch.Tensor:
    """Causal SDPA (math backend) with enable_gqa=True on the projections, then out_proj."""
    q, k, v = project(x, p, H, Hkv, rope)
    o = sdpa_math(q, k, v, is_causal=True, enable_gqa=True).transpose(1, 2).reshape(x.shape)
    return F.linear(o, p["out_proj.weight"], p.get("out_proj.bias"))


def hand_weights64(x: torch.Tensor, p: dict[str, torch.Tensor], H: int, Hkv: int,
                   rope: tuple[int, float] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Float64 causal attention weights (B, H, T, T) by hand, and the values each query head reads (B, H, T, hd)."""
    q, k, v = project(x.double(), {n: t.double() for n, t in p.items()}, H, Hkv, rope)
    owner = torch.arange(H) // (H // Hkv)  # query head h reads kv head h // group
    k, v = k[:, owner], v[:, owner]
    T = x.shape[1]
    scores = (q @ k.transpose(-2, -1)) / q.shape[-1] ** 0.5
    scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(scores, dim=-1), v


def hand_oracle64(x: torch.Tensor, p: dict[str, torch.Tensor], H: int, Hkv: int,
                  rope: tuple[int, float] | None = None) -> torch.Tensor:
    weights, v = hand_weights64(x, p, H, Hkv, rope)
    o = (weights @ v).transpose(1, 2).reshape(x.shape)
    return F.linear(o, p["out_proj.weight"].double(), None if p.get("out_proj.bias") is None
                    else p["out_proj.bias"].double())


# ----------------------------------------------------------------------------------------------- structure
@pytest.mark.points(1)
@pytest.mark.parametrize("bias", [False, True])
def test_parameters_are_the_four_projections(student, gen, bias):
    h = student.isolated.grouped_query_attention.GroupedQueryAttention(24, 6, 3, bias=bias)
    params = h.named_parameters()
    got = {k: tuple(v.shape) for k, v in params.items()}
    shapes = {"W_query": (24, 24), "W_key": (12, 24), "W_value": (12, 24), "out_proj": (24, 24)}
    expected = {f"{n}.weight": s for n, s in shapes.items()}
    expected.update({f"{n}.bias": (s[0],) for n, s in shapes.items() if bias})
    expect_structure(got, expected, what=f"named_parameters() of GroupedQueryAttention(24, 6, 3, bias={bias})")
    x = torch.randn(2, 5, 24, generator=gen)
    expect_call(lambda: h.eval()(x), gqa_oracle(x, params, 6, 3), suspects=gqa_suspects(x, params, 6, 3),
                what="GroupedQueryAttention(24, 6, 3) with its own parameters")


@pytest.mark.points(1)
def test_parameter_counts_shrink_with_the_kv_heads(student, gen):
    # d_model 512, 8 heads of 64: W_query and out_proj 512 x 512 each, W_key and W_value 512 x (Hkv * 64)
    for Hkv, count in ((2, 655_360), (1, 589_824), (8, 1_048_576)):
        h = student.isolated.grouped_query_attention.GroupedQueryAttention(512, 8, Hkv)
        params = h.named_parameters()
        got = sum(t.numel() for t in params.values())
        full = 4 * 512 * 512  # W_key and W_value as wide as W_query
        expect(got == count, f"parameter count of GroupedQueryAttention(512, 8, num_kv_heads={Hkv}): got {got:,}, "
               f"expected {count:,}" + ("\n  " + tag("kv-heads-full-width", "W_key and W_value map to d_model, as in "
                                                     "multi-head attention, instead of num_kv_heads * head_dim")
                                        if got == full else ""))
    x = torch.randn(1, 3, 512, generator=gen)  # the last (MHA) module must attend with what it reports
    expect_call(lambda: h.eval()(x), gqa_oracle(x, params, 8, 8), what="GroupedQueryAttention(512, 8, 8) on (1, 3, 512)",
                atol=1e-4, suspects=gqa_suspects(x, params, 8, 8))


@pytest.mark.points(1)
def test_rope_tables_are_buffers_of_max_len_rows(student):
    # defaults first: max_len 2048 and base 10000; the tables come from (the stand-in) rope_frequencies(hd, max_len, base)
    for kwargs in ({}, {"max_len": 6, "rope_base": 500000.0}):
        h = student.isolated.grouped_query_attention.GroupedQueryAttention(16, 4, 2, rope=True, **kwargs)
        buffers, params, state = h.named_buffers(), h.named_parameters(), h.state_dict()
        what = f"GroupedQueryAttention(16, 4, 2, rope=True{''.join(f', {k}={v}' for k, v in kwargs.items())})"
        expect(not any("rope" in n for n in params), f"{what}: the RoPE tables are parameters ({sorted(params)}), "
               "expected buffers")
        want = stand_in_rope_frequencies(4, kwargs.get("max_len", 2048), kwargs.get("rope_base", 10000.0))
        for which, (name, table) in enumerate(zip(("rope_cos", "rope_sin"), want)):
            expect(name in buffers, f"{what}: named_buffers() has {sorted(buffers)}, expected {name!r}\n  " + tag(
                "not-a-buffer", f"{name} is not a registered buffer: a plain attribute is not moved by .to() and is "
                "not in state_dict()"))
            expect(name in state, f"{what}: state_dict() has {sorted(state)}, expected {name!r} (the specification: "
                   "the names appear in state_dict())\n  " + tag("not-a-buffer", f"{name} is registered with "
                   "persistent=False: a buffer, but not in state_dict(); keep the default persistent=True"))
            expect_tensor(buffers[name], table, what=f"{what}: buffer {name}", suspects=table_suspects(kwargs, which))


# ----------------------------------------------------------------------------------------------- values
SDPA_CASES = [  # (B, T, d_model, H, Hkv, bias, max_len)
    (2, 6, 16, 4, 2, False, 2048),
    (3, 5, 24, 6, 3, True, 8),
    (2, 7, 32, 8, 1, False, 7),  # MQA, T == max_len
    (2, 4, 16, 4, 4, True, 16),  # MHA
    (1, 1, 12, 6, 2, False, 4),  # one token
    (2, 5, 8, 1, 1, True, 5),  # one head: head_dim = d_model
]


@pytest.mark.points(0.75)
@pytest.mark.parametrize("B,T,d,H,Hkv,bias,max_len", SDPA_CASES)
def test_matches_sdpa_with_enable_gqa(student, reference, gen, B, T, d, H, Hkv, bias, max_len):
    h, params = build(student, reference, d, H, Hkv, bias=bias, max_len=max_len)
    x = torch.randn(B, T, d, generator=gen)
    def run():  # T == max_len must be accepted: a ValueError there is a length check off by one
        if T != max_len:
            return h(x)
        return at_the_limit(lambda: h(x), what=f"GroupedQueryAttention(max_len={max_len}) on T = {T} tokens",
                            limit=f"a sequence of T = max_len = {max_len}")

    expect_call(run, gqa_oracle(x, params, H, Hkv), suspects=gqa_suspects(x, params, H, Hkv),
                what=f"GroupedQueryAttention({d}, {H} heads, {Hkv} kv heads, bias={bias}) on (B={B}, T={T}) vs "
                "SDPA(enable_gqa=True)")


@pytest.mark.points(1)
def test_mha_case_matches_nn_multiheadattention(student, reference, gen):
    h, params = build(student, reference, 12, 3, 3, bias=True)
    x = torch.randn(2, 6, 12, generator=gen)
    expect_call(lambda: h(x), mha_oracle(params, 3, x, causal=True), suspects=gqa_suspects(x, params, 3, 3),
                what="GroupedQueryAttention(12, 3, 3, bias=True) vs nn.MultiheadAttention")


@pytest.mark.points(1.5)
def test_float64_values_and_gradients_by_hand(student, reference, gen):
    h, params = build(student, reference, 16, 4, 2, bias=True)
    h.to(dtype=torch.float64)
    params = {n: t.double() for n, t in params.items()}
    x = torch.randn(2, 5, 16, generator=gen, dtype=torch.float64)
    g = torch.randn(2, 5, 16, generator=gen, dtype=torch.float64)
    out, (gx,), pgrads = h.grads(x, grad_output=g)
    names = list(params)
    want, grads = oracle_grads(lambda x, *ps: hand_oracle64(x, dict(zip(names, ps)), 4, 2), [x, *params.values()], g)
    expect_tensor(out, want, what="float64 output", suspects=gqa_suspects(x, params, 4, 2))
    expect_tensor(gx, grads[0], what="gradient of the input x", suspects=GRADIENT_SUSPECTS)
    for name, want_grad in zip(names, grads[1:]):
        expect_tensor(pgrads.get(name), want_grad, what=f"gradient of {name}", suspects=GRADIENT_SUSPECTS)


# ----------------------------------------------------------------------------------------------- RoPE
@pytest.mark.points(1)
@pytest.mark.parametrize("max_len,base", [(16, 500000.0), (9, 100.0)])
def test_rope_turns_queries_and_keys_only(student, reference, gen, max_len, base):
    h, params = build(student, reference, 16, 4, 2, rope=True, max_len=max_len, rope_base=base)
    x = torch.randn(2, 9, 16, generator=gen)
    expect_call(lambda: h(x), gqa_oracle(x, params, 4, 2, rope=(max_len, base)), suspects=gqa_suspects(
        x, params, 4, 2, rope=(max_len, base)), what=f"GroupedQueryAttention(16, 4, 2, rope=True, max_len={max_len}, "
                f"rope_base={base}) with the stand-in rope.py")


@pytest.mark.points(1)
def test_rope_float64_gradients(student, reference, gen):
    h, params = build(student, reference, 8, 2, 1, rope=True, max_len=6)
    h.to(dtype=torch.float64)
    params = {n: t.double() for n, t in params.items()}
    x = torch.randn(2, 6, 8, generator=gen, dtype=torch.float64)
    g = torch.randn(2, 6, 8, generator=gen, dtype=torch.float64)
    out, (gx,), pgrads = h.grads(x, grad_output=g)
    want, (want_gx,) = oracle_grads(lambda x: hand_oracle64(x, params, 2, 1, rope=(6, 10000.0)), [x], g)
    expect_tensor(out, want, what="float64 output with rope=True (stand-in rope.py)",
                  suspects=gqa_suspects(x, params, 2, 1, rope=(6, 10000.0)))
    expect_tensor(gx, want_gx, what="gradient of the input x with rope=True", suspects=GRADIENT_SUSPECTS)
    for name in LAYERS:
        if pgrads.get(f"{name}.weight") is None:
            no_gradient("backward with rope=True", f"{name}.weight")


# ----------------------------------------------------------------------------------------------- causality, devices
@pytest.mark.points(1.5)
def test_is_causal_and_runs_on_the_inputs_device(student, reference, gen):
    h, params = build(student, reference, 16, 4, 2)
    T = 9
    x = torch.randn(2, T, 16, generator=gen)
    t = int(torch.randint(1, T, (1,), generator=gen))
    changed = x.clone()
    changed[:, t:] += 10.0 * torch.randn(2, T - t, 16, generator=gen)
    before = expect_call(lambda: h(x), gqa_oracle(x, params, 4, 2), what="output (16, 4 heads, 2 kv heads, T = 9)",
                         suspects=gqa_suspects(x, params, 4, 2))
    after = h(changed)
    expect_tensor(after[:, :t], before[:, :t], what=f"outputs of tokens 0..{t - 1} after changing tokens {t}..{T - 1}")
    expect_on_input_device(lambda: h.on_meta(x), what="GroupedQueryAttention.forward on the meta device")
    hr, _ = build(student, reference, 16, 4, 2, rope=True, max_len=12)
    expect_on_input_device(lambda: hr.on_meta(x), what="GroupedQueryAttention(rope=True).forward on the meta device")


# ----------------------------------------------------------------------------------------------- dropout
@pytest.mark.points(1)
@pytest.mark.parametrize("p", [0.2, 0.3])  # not 0.5 alone: there p == 1 - p
def test_dropout_acts_on_the_attention_weights(student, reference, gen, p):
    H, Hkv, T, B, d = 4, 2, 4, 32, 32  # head_dim 8 >= T: each head's value rows are independent
    h, params = build(student, reference, d, H, Hkv, dropout=p, bias=True)
    h.to(dtype=torch.float64)
    params = {n: t.double() for n, t in params.items()}
    x = torch.randn(B, T, d, generator=gen, dtype=torch.float64)
    expect_repeatable(h(x), h(x), what=f"two eval-mode calls (dropout={p})")
    expect_call(lambda: h(x), hand_oracle64(x, params, H, Hkv), what=f"eval-mode output with dropout={p}",
                suspects=gqa_suspects(x, params, H, Hkv))
    g = torch.randn(B, T, d, generator=gen, dtype=torch.float64)
    got = h.train().grads(x, grad_output=g)  # forward and backward: an in-place dropout breaks the backward
    out = got[0]
    expect_shape(out, (B, T, d), what="training-mode output")
    # undo out_proj (out = z W_o^T + b_o), then split z into heads: z_h = dropout(weights_h) @ values_h
    z = torch.linalg.solve(params["out_proj.weight"], (out - params["out_proj.bias"]).transpose(-2, -1))
    heads = z.transpose(-2, -1).reshape(B, T, H, d // H).transpose(1, 2)
    weights, values = hand_weights64(x, params, H, Hkv)
    expect_dropout_on_weights(heads, weights, values, p, what="training-mode output, before out_proj, per head")
    expect_new_draw(out, h(x), what=f"GroupedQueryAttention(dropout={p}).train()(x)")
    ref = reference.grouped_query_attention.GroupedQueryAttention(d, H, Hkv, p, True).double()
    ref.load_state_dict(params)
    ref.dropout = FixedDropout(output_multipliers(heads, weights, values, p))  # the reference with your draw
    expect_grads_of(got, ref, x, grad_output=g, what="training-mode output (with your own dropout draw)")


@pytest.mark.points(1)
def test_eval_mode_is_deterministic_and_ignores_dropout(student, reference, gen):
    h, params = build(student, reference, 16, 4, 1, dropout=0.5)
    x = torch.randn(2, 6, 16, generator=gen)
    first, second = h(x), h(x)
    expect_repeatable(first, second, what="two eval-mode calls (dropout=0.5)")
    expect_tensor(first, gqa_oracle(x, params, 4, 1), what="eval-mode output with dropout=0.5 vs no dropout",
                  suspects=gqa_suspects(x, params, 4, 1))


# ----------------------------------------------------------------------------------------------- refusals
@pytest.mark.points(1)
def test_indivisible_head_counts_are_refused(student, gen):
    ok = student.isolated.grouped_query_attention.GroupedQueryAttention(12, 6, 2).eval()
    x = torch.randn(2, 3, 12, generator=gen)
    p = ok.named_parameters()
    expect_call(lambda: ok(x), gqa_oracle(x, p, 6, 2), what="GroupedQueryAttention(12, 6, 2) with its own parameters",
                suspects=gqa_suspects(x, p, 6, 2))
    for args in ((12, 6, 4), (12, 4, 3), (10, 4, 2)):
        expect_raises(lambda a=args: student.isolated.grouped_query_attention.GroupedQueryAttention(*a), "ValueError",
                      what=f"GroupedQueryAttention{args}")


@pytest.mark.points(0.5)
def test_sequences_longer_than_max_len_are_refused(student, reference, gen):
    h, params = build(student, reference, 8, 2, 1, max_len=5)
    x = torch.randn(1, 5, 8, generator=gen)
    expect_call(lambda: h(x), gqa_oracle(x, params, 2, 1), what="GroupedQueryAttention(8, 2, 1, max_len=5) on 5 tokens",
                suspects=gqa_suspects(x, params, 2, 1))
    longer = torch.randn(1, 6, 8, generator=gen)
    expect_raises(lambda: h(longer), "ValueError", what="GroupedQueryAttention(max_len=5) on 6 tokens")


# ----------------------------------------------------------------------------------------------- precision
@pytest.mark.severe(OVERFLOW)
@pytest.mark.points(1)
def test_large_inputs_do_not_overflow(student, reference, gen):
    h, params = build(student, reference, 16, 4, 2, bias=True)
    x0 = torch.randn(2, 7, 16, generator=gen)
    x = x0 * 30  # scores in the hundreds: exp overflows float32
    want = hand_oracle64(x, params, 4, 2).float()
    got = expect_stable(lambda: h(x), lambda: h(x0), what="GroupedQueryAttention on x * 30")
    expect_tensor(got, want, what="GroupedQueryAttention on x * 30", atol=1e-3, rtol=1e-3,
                  suspects=gqa_suspects(x, params, 4, 2))


@pytest.mark.points(0.5)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_half_precision_module_is_as_accurate_as_the_reference(student, reference, gen, dtype):
    h = student.isolated.grouped_query_attention.GroupedQueryAttention(32, 4, 2, bias=True).eval()
    ref = reference.grouped_query_attention.GroupedQueryAttention(32, 4, 2, bias=True)
    transplant(h, ref, hint=NAMES_HINT)  # the same weights in both, then both in half precision
    ref.eval().to(dtype)
    h.to(dtype=dtype)
    x = torch.randn(2, 16, 32, generator=gen).to(dtype)
    got = h(x)
    expect(isinstance(got, torch.Tensor) and got.dtype == dtype, f"{dtype} module: got "
           f"{getattr(got, 'dtype', type(got).__name__)}, expected {dtype}")
    exact = hand_oracle64(x.double(), params_of(ref), 4, 2)  # the rounded weights and input, in float64
    with torch.no_grad():
        expect_no_worse_than(got, ref(x), exact, what=f"GroupedQueryAttention in {dtype} on the CPU")


# ----------------------------------------------------------------------------------------------- CUDA (extra)
@pytest.mark.cuda
@pytest.mark.points(0.5)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_cuda_half_precision_matches_the_fused_kernel(student, reference, gen, dtype):
    """(B, T, d_model) = (2, 512, 1024), 16 heads of 64, 4 kv heads, on the GPU in half precision: the error against
    float64 must be no worse than PyTorch's fused kernel's (SDPA, enable_gqa) on the same half-precision projections."""
    h, params = build(student, reference, 1024, 16, 4)
    h.to(dtype=dtype, device="cuda")
    x = (torch.randn(2, 512, 1024, generator=gen) * 0.5).to(dtype)
    p_half = {n: t.to(device="cuda", dtype=dtype) for n, t in params.items()}
    q, k, v = project(x.cuda(), p_half, 16, 4, None)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True).transpose(1, 2).reshape(2, 512, 1024)
    kernel = F.linear(o, p_half["out_proj.weight"]).cpu()
    exact = hand_oracle64(x.double(), {n: t.cpu().double() for n, t in p_half.items()}, 16, 4)
    got = h(x.cuda())
    expect_no_worse_than(got.cpu() if isinstance(got, torch.Tensor) else got, kernel, exact,
                         what=f"GroupedQueryAttention on CUDA ({dtype}, T=512)")
