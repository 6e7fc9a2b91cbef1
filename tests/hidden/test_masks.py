"""Hidden tests for `masks`: exact values and dtypes, then each mask's effect inside SDPA (math backend)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from grader.testing.catalogue.masks import FINITE_FILL, additive_suspects, bool_mask_kind, causal_suspects, padding_suspects
from grader.testing.checks import expect, expect_call, expect_shape, expect_tensor, fail
from grader.testing.devices import expect_on_input_device
from grader.testing.diagnosis import Suspects

pytestmark = pytest.mark.exercise("masks")



def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kwargs) -> torch.Tensor:
    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(q, k, v, **kwargs)


def expect_bool_mask(got, shape: tuple[int, ...], what: str, suspects: Suspects | None = None) -> None:
    """Shape, then dtype exactly torch.bool: SDPA reads a float mask as a bias to ADD, not as keep/block."""
    __tracebackhide__ = True
    expect_shape(got, shape, what=what, suspects=suspects, expected=torch.zeros(shape, dtype=torch.bool))
    said = bool_mask_kind(got)
    expect(got.dtype == torch.bool, f"{what}: got dtype {got.dtype}, expected torch.bool" + (f"\n  {said}" if said
                                                                                             else ""))


def qkv(gen: torch.Generator, b: int, t: int, s: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q (b, 2, t, 4), k and v (b, 2, s, 4): two heads, head_dim 4, unsaturated randn inputs."""
    return (torch.randn(b, 2, t, 4, generator=gen), torch.randn(b, 2, s, 4, generator=gen),
            torch.randn(b, 2, s, 4, generator=gen))


# ---------------------------------------------------------------- causal_mask

@pytest.mark.points(1)
def test_causal_mask_equals_tril(student):
    for seq_len in (7, 1):  # one point for both: torch.ones(1, 1) alone is no causal mask
        got = student.masks.causal_mask(seq_len, device="cpu")
        expect_bool_mask(got, (seq_len, seq_len), f"causal_mask({seq_len})")
        expect_tensor(got, torch.ones(seq_len, seq_len, dtype=torch.bool).tril(), what=f"causal_mask({seq_len})",
                      suspects=causal_suspects(seq_len))
    expect_on_input_device(lambda: student.masks.causal_mask.on_meta(5, device="meta"), what="causal_mask(5, device='meta')")


@pytest.mark.points(1)
def test_causal_mask_in_sdpa_equals_is_causal(student, gen):
    q, k, v = qkv(gen, 2, 6, 6)
    mask = student.masks.causal_mask(6)
    expect_bool_mask(mask, (6, 6), "causal_mask(6)")
    expect_tensor(mask, torch.ones(6, 6, dtype=torch.bool).tril(), what="causal_mask(6)", suspects=causal_suspects(6))
    expect_tensor(sdpa(q, k, v, attn_mask=mask), sdpa(q, k, v, is_causal=True),
                  what="SDPA(q, k, v, attn_mask=causal_mask(6)) vs SDPA(..., is_causal=True)")


@pytest.mark.points(1)
def test_changing_future_tokens_leaves_earlier_outputs_unchanged(student, gen):
    t, cut = 7, 3
    q, k, v = qkv(gen, 2, t, t)
    mask = student.masks.causal_mask(t)
    expect_bool_mask(mask, (t, t), f"causal_mask({t})")
    expect_tensor(mask, torch.ones(t, t, dtype=torch.bool).tril(), what=f"causal_mask({t})", suspects=causal_suspects(t))
    k2, v2 = k.clone(), v.clone()
    k2[:, :, cut:] += 10 * torch.randn(2, 2, t - cut, 4, generator=gen)  # perturb only positions >= cut
    v2[:, :, cut:] += 10 * torch.randn(2, 2, t - cut, 4, generator=gen)
    before = sdpa(q, k, v, attn_mask=mask)
    after = sdpa(q, k2, v2, attn_mask=mask)
    # an all-False or diagonal-only mask hides the future too: the outputs must be causal attention's
    expect_tensor(before, sdpa(q, k, v, is_causal=True), what=f"SDPA with attn_mask=causal_mask({t})")
    for i in range(cut):
        if not torch.allclose(before[:, :, i], after[:, :, i], atol=1e-6, rtol=0):
            fail(f"with attn_mask=causal_mask({t}), query {i}'s output changed when only keys/values {cut}..{t - 1} "
                 f"changed: the mask lets query {i} see the future")


# ---------------------------------------------------------------- padding_mask

@pytest.mark.points(1)
def test_padding_mask_matches_lengths_including_empty_and_full(student, gen):
    b, s = 6, 5
    lengths = torch.randint(0, s + 1, (b,), generator=gen)
    lengths[0], lengths[1] = 0, s  # an empty sequence (all False) and a full one (all True)
    on = padding_suspects(lengths, s)
    got = expect_call(lambda: student.masks.padding_mask(lengths, s), torch.zeros(b, s, dtype=torch.bool),
                      check_values=False, what=f"padding_mask(lengths of shape ({b},), max_len={s})", suspects=on)
    expect_bool_mask(got, (b, s), f"padding_mask(lengths of shape ({b},), max_len={s})", on)
    expected = torch.arange(s)[None, :] < lengths[:, None]
    expect_tensor(got, expected, what=f"padding_mask(lengths={lengths.tolist()}, max_len={s})", suspects=on)
    expect_on_input_device(lambda: student.masks.padding_mask.on_meta(lengths, s), what="padding_mask(lengths on meta)")


@pytest.mark.points(1)
def test_padded_keys_and_values_have_no_influence_in_sdpa(student, gen):
    b, t, s = 3, 4, 6  # queries and keys of different lengths: a padding mask only looks at the keys
    # no sequence fills max_len, on any draw: a mask only as wide as the longest sequence is then always too
    # narrow (with one at full length, it was right: caught on 9 draws of 12)
    lengths = torch.randint(1, s, (b,), generator=gen)
    lengths[0] = 2
    q, k, v = qkv(gen, b, t, s)
    on = padding_suspects(lengths, s)
    mask = expect_call(lambda: student.masks.padding_mask(lengths, s), torch.arange(s)[None, :] < lengths[:, None],
                       what=f"padding_mask(lengths={lengths.tolist()}, max_len={s})", suspects=on)
    expect_bool_mask(mask, (b, s), f"padding_mask(lengths={lengths.tolist()}, max_len={s})", on)
    keep = mask[:, None, None, :]  # (B, 1, 1, S): broadcast over heads and queries
    pad = ~(torch.arange(s)[None, :] < lengths[:, None])  # (B, S), the true padding positions
    noise_k = 10 * torch.randn(b, 2, s, 4, generator=gen) * pad[:, None, :, None]
    noise_v = 10 * torch.randn(b, 2, s, 4, generator=gen) * pad[:, None, :, None]
    before = sdpa(q, k, v, attn_mask=keep)
    after = sdpa(q, k + noise_k, v + noise_v, attn_mask=keep)
    for row in range(b):
        if not torch.allclose(before[row], after[row], atol=1e-6, rtol=0):
            fail(f"sequence {row} (length {int(lengths[row])} of {s}): changing its padded keys/values changed the "
                 "attention output, so the mask lets queries attend to padding")
    expected = sdpa(q, k, v, attn_mask=~pad[:, None, None, :])
    expect_tensor(before, expected, what="SDPA with attn_mask=padding_mask(...)[:, None, None, :]")


# ---------------------------------------------------------------- to_additive

@pytest.mark.points(1)
def test_to_additive_is_zero_where_true_and_exactly_minus_inf_where_false(student, gen):
    mask = torch.rand(2, 4, 5, generator=gen) < 0.5  # (B, T, S), random pattern
    mask[0, 0] = True
    mask[1, 0] = False  # one fully allowed row, one fully blocked row
    expect_call(lambda: student.masks.to_additive(mask), torch.zeros(2, 4, 5).masked_fill(~mask, float("-inf")),
                what="to_additive(mask of shape (2, 4, 5))", suspects=additive_suspects(mask) + FINITE_FILL)
    expect_on_input_device(lambda: student.masks.to_additive.on_meta(mask), what="to_additive(mask on meta)")


@pytest.mark.points(0.5)
@pytest.mark.parametrize("dtype", [torch.float16, torch.float64], ids=["float16", "float64"])
def test_to_additive_honours_dtype(student, gen, dtype):
    mask = torch.rand(3, 6, generator=gen) < 0.5
    mask[:, 0] = True
    expected = torch.zeros(3, 6, dtype=dtype).masked_fill(~mask, float("-inf"))
    expect_call(lambda: student.masks.to_additive(mask, dtype=dtype), expected, what=f"to_additive(mask, dtype={dtype})",
                suspects=additive_suspects(mask, dtype) + FINITE_FILL)


@pytest.mark.points(0.5)
def test_additive_causal_mask_in_sdpa_equals_is_causal(student, gen):
    q, k, v = qkv(gen, 2, 5, 5)
    tril = torch.ones(5, 5, dtype=torch.bool).tril()
    bias = expect_call(lambda: student.masks.to_additive(tril), torch.zeros(5, 5).masked_fill(~tril, float("-inf")),
                       what="to_additive(tril mask of 5)", suspects=additive_suspects(tril) + FINITE_FILL)
    expect_tensor(sdpa(q, k, v, attn_mask=bias), sdpa(q, k, v, is_causal=True),
                  what="SDPA(q, k, v, attn_mask=to_additive(causal)) vs SDPA(..., is_causal=True)")


@pytest.mark.points(0.5)
def test_causal_and_padding_masks_combine_into_a_float64_hand_oracle(student, gen):
    b, t = 3, 6
    lengths = torch.randint(1, t, (b,), generator=gen)  # none fills t, on any draw (as above)
    lengths[0] = 1  # query 0 always sees key 0, so no row is fully blocked
    # and one row's keys reach past every early query on every draw: a causal mask one key too wide shows there
    # (with all rows at length 1 it could not: caught on 37 draws of 40)
    lengths[1] = t - 1
    causal = student.masks.causal_mask(t)
    pad = student.masks.padding_mask(lengths, t)
    expect_bool_mask(causal, (t, t), f"causal_mask({t})")
    expect_bool_mask(pad, (b, t), f"padding_mask(lengths, {t})", padding_suspects(lengths, t))
    bias = student.masks.to_additive(causal[None, None] & pad[:, None, None, :], dtype=torch.float64)
    expect_shape(bias, (b, 1, t, t), what="to_additive(causal & padding)")
    q, k, v = (x.double() for x in qkv(gen, b, t, t))
    got = sdpa(q, k, v, attn_mask=bias)
    keep = torch.ones(t, t, dtype=torch.bool).tril()[None, None] & (torch.arange(t) < lengths[:, None])[:, None, None]
    scores = (q @ k.transpose(-2, -1) / 2.0).masked_fill(~keep, float("-inf"))  # scale 1/sqrt(head_dim=4)
    expected = torch.softmax(scores, dim=-1) @ v
    expect_tensor(got, expected, what="SDPA with to_additive(causal_mask & padding_mask) (float64)")
