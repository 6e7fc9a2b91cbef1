"""Public tests for `grouped_query_attention`: shapes and parameters, agreement with PyTorch's grouped SDPA
(`enable_gqa=True`), MHA and MQA as special cases, causality, RoPE on queries and keys, the divisibility checks."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from grader.inside.standins import stand_in_apply_rope, stand_in_rope_frequencies
from grader.protocol.errors import StudentError
from grader.testing.attention import mha_oracle, sdpa_math
from grader.testing.checks import expect, expect_shape, expect_tensor, fail

pytestmark = pytest.mark.exercise("grouped_query_attention")

NAMES_HINT = ("name the layers W_query (d_model -> d_model), W_key and W_value (d_model -> num_kv_heads * head_dim) "
              "and out_proj (d_model -> d_model), all nn.Linear(..., bias=bias)")
GROUP_HINT = ("query head h uses kv head h // (num_heads // num_kv_heads): k.repeat_interleave(group, dim=1), "
              "not k.repeat(1, group, 1, 1)")


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


@pytest.mark.points(3)
def test_output_and_parameter_shapes(student, gen):
    h = student.isolated.grouped_query_attention.GroupedQueryAttention(16, 4, 2).eval()
    got = {k: tuple(v.shape) for k, v in h.named_parameters().items()}
    expected = {"W_query.weight": (16, 16), "W_key.weight": (8, 16), "W_value.weight": (8, 16),
                "out_proj.weight": (16, 16)}
    expect(got == expected, f"named_parameters() of GroupedQueryAttention(16, num_heads=4, num_kv_heads=2): got {got}, "
           f"expected {expected}", NAMES_HINT + "; head_dim = d_model // num_heads = 4, so W_key maps 16 -> 2 * 4")
    expect_shape(h(torch.randn(2, 5, 16, generator=gen)), (2, 5, 16), what="GroupedQueryAttention(16, 4, 2)(x (2, 5, 16))")


@pytest.mark.points(5)
def test_matches_sdpa_with_enable_gqa(student, gen):
    h = student.isolated.grouped_query_attention.GroupedQueryAttention(24, 6, 2).eval()
    x = torch.randn(2, 7, 24, generator=gen)
    expect_tensor(h(x), gqa_oracle(x, h.named_parameters(), 6, 2),
                  what="GroupedQueryAttention(24, 6 heads, 2 kv heads) vs F.scaled_dot_product_attention(enable_gqa=True)",
                  hint=GROUP_HINT + "; scale by 1/sqrt(head_dim); causal mask; softmax over the keys")


@pytest.mark.points(3)
def test_as_many_kv_heads_as_heads_is_multi_head_attention(student, gen):
    h = student.isolated.grouped_query_attention.GroupedQueryAttention(8, 2, 2).eval()
    x = torch.randn(3, 6, 8, generator=gen)
    expect_tensor(h(x), mha_oracle(h.named_parameters(), 2, x, causal=True),
                  what="GroupedQueryAttention(8, 2, num_kv_heads=2) vs nn.MultiheadAttention (causal)",
                  hint="with num_kv_heads == num_heads every query head has its own key/value head")


@pytest.mark.points(3)
def test_one_kv_head_is_multi_query_attention(student, gen):
    h = student.isolated.grouped_query_attention.GroupedQueryAttention(16, 4, 1).eval()
    x = torch.randn(2, 5, 16, generator=gen)
    expect_tensor(h(x), gqa_oracle(x, h.named_parameters(), 4, 1),
                  what="GroupedQueryAttention(16, 4, num_kv_heads=1): every head shares one key/value head",
                  hint=GROUP_HINT)


@pytest.mark.points(3)
def test_is_causal(student, gen):
    h = student.isolated.grouped_query_attention.GroupedQueryAttention(16, 4, 2).eval()
    x = torch.randn(2, 8, 16, generator=gen)
    changed = x.clone()
    changed[:, 5:] += 10.0
    before, after = h(x), h(changed)
    expect_shape(before, (2, 8, 16), what="output")
    expect_tensor(after[:, :5], before[:, :5], what="outputs of tokens 0..4 after changing tokens 5..7",
                  hint="mask every key j > i with -inf before the softmax: torch.ones(T, T, dtype=torch.bool).tril()")


@pytest.mark.points(3)
def test_rope_rotates_queries_and_keys(student, gen):
    # graded on its own: rope.py's functions are replaced by the grader's stand-ins (not RoPE, but position
    # dependent), so this test checks WHERE you call them, not your rope.py
    h = student.isolated.grouped_query_attention.GroupedQueryAttention(16, 4, 2, rope=True, max_len=12).eval()
    x = torch.randn(2, 9, 16, generator=gen)
    expect_tensor(h(x), gqa_oracle(x, h.named_parameters(), 4, 2, rope=(12, 10000.0)),
                  what="GroupedQueryAttention(16, 4, 2, rope=True, max_len=12) with the grader's stand-in rope.py",
                  hint="in __init__: self.rope_cos, self.rope_sin = rope_frequencies(head_dim, max_len, rope_base) "
                       "(as buffers); in forward, after splitting the heads: q = apply_rope(q, cos, sin), the same for "
                       "k, never for v")


@pytest.mark.points(2)
def test_heads_not_divisible_by_kv_heads_are_refused(student):
    for args in ((16, 4, 3), (10, 4, 2)):
        with pytest.raises(StudentError) as info:
            student.isolated.grouped_query_attention.GroupedQueryAttention(*args)
            fail(f"GroupedQueryAttention{args} was built without an error, expected a ValueError",
                 "raise ValueError unless num_heads % num_kv_heads == 0 and d_model % num_heads == 0")
        expect(info.value.exc_type == "ValueError", f"GroupedQueryAttention{args} raised {info.value.exc_type}, "
               "expected a ValueError", "raise ValueError(...) in __init__")
