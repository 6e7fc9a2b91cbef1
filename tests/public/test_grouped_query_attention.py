"""Public tests for `grouped_query_attention`: shapes and parameters, agreement with PyTorch's grouped SDPA
(`enable_gqa=True`), MHA and MQA as special cases, causality, RoPE on queries and keys and its tables, dropout, large
inputs, the divisibility checks."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from grader.inside.standins import stand_in_apply_rope, stand_in_rope_frequencies
from grader.testing.attention import mha_oracle, sdpa_math
from grader.testing.catalogue.modules import gqa_suspects
from grader.testing.catalogue.structure import expect_structure
from grader.testing.checks import expect, expect_call, expect_raises, expect_shape, expect_tensor
from grader.testing.diagnosis import Suspects, Variant, tag
from grader.testing.oracles import expect_dropout_on_weights, expect_repeatable
from grader.testing.params import transplant

pytestmark = pytest.mark.exercise("grouped_query_attention")



def gqa_oracle(x: torch.Tensor, p: dict[str, torch.Tensor], H: int, Hkv: int,
               rope: tuple[int, float] | None = None) -> torch.Tensor:
    """Projections, optional (stand-in) rotation of q and k, causal SDPA with enable_gqa, out_proj."""
    B, T, d = x.shape
    hd = d // H
    q, k, v = (F.linear(x, p[f"{n}.weight"], p.get(f"{n}.bias")) for n in ("W_query", "W_key", "W_value"))
    q = q.view(B, T, H, hd).transpose(1, 2)
    k, v = (t.view(B, T, Hkv, hd).transpose(1, 2) for t in (k, v))
    if rope is not None:
        tables = stand_in_rope_frequencies(hd, rope[0], rope[1])
        q, k = stand_in_apply_rope(q, *tables), stand_in_apply_rope(k, *tables)
    o = sdpa_math(q, k, v, is_causal=True, enable_gqa=True).transpose(1, 2).reshape(B, T, d)
    return F.linear(o, p["out_proj.weight"], p.get("out_proj.bias"))


def gqa(student, *args, **kwargs):
    return student.isolated.grouped_query_attention.GroupedQueryAttention(*args, **kwargs).eval()


@pytest.mark.points(2.5)
def test_output_and_parameter_shapes(student, gen):
    for bias in (False, True):
        h = gqa(student, 16, 4, 2, bias=bias)
        got = {k: tuple(v.shape) for k, v in h.named_parameters().items()}
        shapes = {"W_query": (16, 16), "W_key": (8, 16), "W_value": (8, 16), "out_proj": (16, 16)}
        expected = {f"{n}.weight": s for n, s in shapes.items()}
        expected.update({f"{n}.bias": (s[0],) for n, s in shapes.items() if bias})
        expect_structure(got, expected, what=f"named_parameters() of GroupedQueryAttention(16, 4, 2, bias={bias})")
    expect_shape(h(torch.randn(2, 5, 16, generator=gen)), (2, 5, 16), what="GroupedQueryAttention(16, 4, 2)(x (2, 5, 16))")


@pytest.mark.points(5)
def test_matches_sdpa_with_enable_gqa(student, gen):
    h = gqa(student, 24, 6, 2)
    x = torch.randn(2, 7, 24, generator=gen)
    p = h.named_parameters()
    expect_call(lambda: h(x), gqa_oracle(x, p, 6, 2), suspects=gqa_suspects(x, p, 6, 2),
                what="GroupedQueryAttention(24, 6 heads, 2 kv heads) vs F.scaled_dot_product_attention(enable_gqa=True)")
    big = x * 30  # scores in the hundreds: exp overflows unless the row max is subtracted
    expect_call(lambda: h(big), gqa_oracle(big, p, 6, 2), what="GroupedQueryAttention on x * 30", atol=1e-4,
                rtol=1e-3, suspects=gqa_suspects(big, p, 6, 2))


@pytest.mark.points(2.5)
def test_as_many_kv_heads_as_heads_is_multi_head_attention(student, gen):
    h = gqa(student, 8, 2, 2)
    x = torch.randn(3, 6, 8, generator=gen)
    p = h.named_parameters()
    expect_call(lambda: h(x), mha_oracle(p, 2, x, causal=True), suspects=gqa_suspects(x, p, 2, 2),
                what="GroupedQueryAttention(8, 2, num_kv_heads=2) vs nn.MultiheadAttention (causal)")


@pytest.mark.points(2.5)
def test_one_kv_head_is_multi_query_attention(student, gen):
    h = gqa(student, 16, 4, 1)
    x = torch.randn(2, 5, 16, generator=gen)
    p = h.named_parameters()
    expect_call(lambda: h(x), gqa_oracle(x, p, 4, 1), suspects=gqa_suspects(x, p, 4, 1),
                what="GroupedQueryAttention(16, 4, num_kv_heads=1): every head shares one key/value head")


@pytest.mark.points(2)
def test_is_causal(student, gen):
    h = gqa(student, 16, 4, 2)
    x = torch.randn(2, 8, 16, generator=gen)
    changed = x.clone()
    changed[:, 5:] += 10.0
    before, after = h(x), h(changed)
    expect_shape(before, (2, 8, 16), what="output")
    expect_tensor(after[:, :5], before[:, :5], what="outputs of tokens 0..4 after changing tokens 5..7")


@pytest.mark.points(4)
def test_rope_rotates_queries_and_keys(student, gen):
    # graded on its own: rope.py's functions are replaced by the grader's stand-ins (not RoPE, but position
    # dependent), so this test checks WHERE you call them, not your rope.py
    h = gqa(student, 16, 4, 2, rope=True, max_len=12, rope_base=500.0)
    buffers = h.named_buffers()
    for i, name in enumerate(("rope_cos", "rope_sin")):
        expect(name in buffers, f"named_buffers(): got {sorted(buffers)}, expected {name!r}\n  " + tag(
            "not-a-buffer", f"{name} is not a registered buffer: .to() leaves a plain attribute behind"))
        want = stand_in_rope_frequencies(4, 12, 500.0)[i]
        expect_tensor(buffers[name], want, what=f"buffer {name} of GroupedQueryAttention(16, 4, 2, rope=True, "
                      "max_len=12, rope_base=500)", suspects=Suspects((Variant(
                          "rope-base-ignored", "tables built with base 10000 whatever rope_base is",
                          lambda i=i: stand_in_rope_frequencies(4, 12, 10000.0)[i]),)))
    x = torch.randn(2, 9, 16, generator=gen)
    p = h.named_parameters()
    expect_call(lambda: h(x), gqa_oracle(x, p, 4, 2, rope=(12, 500.0)), suspects=gqa_suspects(x, p, 4, 2, rope=(12, 500.0)),
                what="GroupedQueryAttention(16, 4, 2, rope=True, max_len=12) with the grader's stand-in rope.py")


@pytest.mark.points(1.5)
def test_dropout_is_off_in_eval_and_on_in_training(student, gen):
    h = gqa(student, 16, 4, 2, dropout=0.5)
    x = torch.randn(2, 6, 16, generator=gen)
    expect_repeatable(h(x), h(x), what="two eval-mode calls (dropout=0.5)")
    h.train()
    expect(not torch.equal(h(x), h(x)), "two training-mode calls with dropout=0.5 gave identical outputs")
    # 2 heads and 2 kv heads of 8, W_value and out_proj the identity: the output is each head's dropout(weights) @ x
    d, H, T, p_drop = 16, 2, 4, 0.3
    h = gqa(student, d, H, H, dropout=p_drop)
    w = {"W_query.weight": torch.randn(d, d, generator=gen) / 4, "W_key.weight": torch.randn(d, d, generator=gen) / 4,
         "W_value.weight": torch.eye(d), "out_proj.weight": torch.eye(d)}
    transplant(h, w, hint="name the layers W_query, W_key, W_value and out_proj")
    h.to(dtype=torch.float64)
    h.train()
    x = torch.randn(32, T, d, generator=gen, dtype=torch.float64)
    heads = h(x).view(32, T, H, d // H).transpose(1, 2)
    q, k = ((x @ w[f"{n}.weight"].double().T).view(32, T, H, d // H).transpose(1, 2) for n in ("W_query", "W_key"))
    scores = (q @ k.transpose(-2, -1) / (d // H) ** 0.5).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1),
                                                                      float("-inf"))
    expect_dropout_on_weights(heads, torch.softmax(scores, dim=-1), x.view(32, T, H, d // H).transpose(1, 2), p_drop,
                              what="training-mode output (W_value and out_proj the identity), per head")


@pytest.mark.points(2)
def test_heads_not_divisible_by_kv_heads_are_refused(student):
    for args in ((16, 4, 3), (10, 4, 2)):
        expect_raises(lambda a=args: student.isolated.grouped_query_attention.GroupedQueryAttention(*a), "ValueError",
                      what=f"GroupedQueryAttention{args}")
