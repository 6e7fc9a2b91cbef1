"""Hidden tests for `masks`: exact values and dtypes, then each mask's effect inside SDPA (math backend)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from grader.testing.checks import expect, expect_shape, expect_tensor, fail
from grader.testing.devices import expect_on_input_device

pytestmark = pytest.mark.exercise("masks")

CAUSAL_HINT = ("True = may attend: query i sees keys 0..i, so the mask is torch.ones(T, T, dtype=torch.bool).tril(); "
               "triu(diagonal=1) is the set of BLOCKED positions (nn.MultiheadAttention's convention, not SDPA's)")
PAD_HINT = "True where j < lengths[b] (a real token): torch.arange(max_len)[None, :] < lengths[:, None]"


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kwargs) -> torch.Tensor:
    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(q, k, v, **kwargs)


def expect_bool_mask(got, shape: tuple[int, ...], what: str, hint: str) -> None:
    """Shape, then dtype exactly torch.bool: SDPA reads a float mask as a bias to ADD, not as keep/block."""
    __tracebackhide__ = True
    expect_shape(got, shape, what=what, hint=hint)
    expect(got.dtype == torch.bool, f"{what}: got dtype {got.dtype}, expected torch.bool",
           hint="SDPA adds a float mask to the scores, so a 0/1 float mask adds +1 and blocks nothing: "
                "return a boolean tensor")


def qkv(gen: torch.Generator, b: int, t: int, s: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q (b, 2, t, 4), k and v (b, 2, s, 4): two heads, head_dim 4, unsaturated randn inputs."""
    return (torch.randn(b, 2, t, 4, generator=gen), torch.randn(b, 2, s, 4, generator=gen),
            torch.randn(b, 2, s, 4, generator=gen))


# ---------------------------------------------------------------- causal_mask

@pytest.mark.points(1)
def test_causal_mask_equals_tril(student):
    for seq_len in (7, 1):  # one point for both: torch.ones(1, 1) alone is no causal mask
        got = student.masks.causal_mask(seq_len, device="cpu")
        expect_bool_mask(got, (seq_len, seq_len), f"causal_mask({seq_len})", CAUSAL_HINT)
        expect_tensor(got, torch.ones(seq_len, seq_len, dtype=torch.bool).tril(), what=f"causal_mask({seq_len})",
                      hint=CAUSAL_HINT)
    expect_on_input_device(lambda: student.masks.causal_mask.on_meta(5, device="meta"), what="causal_mask(5, device='meta')",
                           hint="make the mask on the device you were given: torch.ones(..., device=device)")


@pytest.mark.points(1)
def test_causal_mask_in_sdpa_equals_is_causal(student, gen):
    q, k, v = qkv(gen, 2, 6, 6)
    mask = student.masks.causal_mask(6)
    expect_bool_mask(mask, (6, 6), "causal_mask(6)", CAUSAL_HINT)
    expect_tensor(sdpa(q, k, v, attn_mask=mask), sdpa(q, k, v, is_causal=True),
                  what="SDPA(q, k, v, attn_mask=causal_mask(6)) vs SDPA(..., is_causal=True)", hint=CAUSAL_HINT)


@pytest.mark.points(1)
def test_changing_future_tokens_leaves_earlier_outputs_unchanged(student, gen):
    t, cut = 7, 3
    q, k, v = qkv(gen, 2, t, t)
    mask = student.masks.causal_mask(t)
    expect_shape(mask, (t, t), what=f"causal_mask({t})", hint=CAUSAL_HINT)
    expect(mask.dtype in (torch.bool, torch.float32),
           f"causal_mask({t}): got dtype {mask.dtype}, expected torch.bool", hint=CAUSAL_HINT)
    k2, v2 = k.clone(), v.clone()
    k2[:, :, cut:] += 10 * torch.randn(2, 2, t - cut, 4, generator=gen)  # perturb only positions >= cut
    v2[:, :, cut:] += 10 * torch.randn(2, 2, t - cut, 4, generator=gen)
    before = sdpa(q, k, v, attn_mask=mask)
    after = sdpa(q, k2, v2, attn_mask=mask)
    # an all-False or diagonal-only mask hides the future too: the outputs must be causal attention's
    expect_tensor(before, sdpa(q, k, v, is_causal=True), what=f"SDPA with attn_mask=causal_mask({t})",
                  hint=CAUSAL_HINT)
    for i in range(cut):
        if not torch.allclose(before[:, :, i], after[:, :, i], atol=1e-6, rtol=0):
            fail(f"with attn_mask=causal_mask({t}), query {i}'s output changed when only keys/values {cut}..{t - 1} "
                 f"changed: the mask lets query {i} see the future", CAUSAL_HINT)


# ---------------------------------------------------------------- padding_mask

@pytest.mark.points(1)
def test_padding_mask_matches_lengths_including_empty_and_full(student, gen):
    b, s = 6, 5
    lengths = torch.randint(0, s + 1, (b,), generator=gen)
    lengths[0], lengths[1] = 0, s  # an empty sequence (all False) and a full one (all True)
    got = student.masks.padding_mask(lengths, s)
    expect_bool_mask(got, (b, s), f"padding_mask(lengths of shape ({b},), max_len={s})", PAD_HINT)
    expected = torch.arange(s)[None, :] < lengths[:, None]
    for row in range(b):
        if not torch.equal(got[row], expected[row]):
            fail(f"padding_mask(lengths={lengths.tolist()}, max_len={s}): row {row} (length {int(lengths[row])}) "
                 f"got {got[row].tolist()}, expected {expected[row].tolist()}",
                 PAD_HINT + "; True marks real tokens (the opposite of nn.MultiheadAttention's key_padding_mask)")
    expect_on_input_device(lambda: student.masks.padding_mask.on_meta(lengths, s), what="padding_mask(lengths on meta)",
                           hint="torch.arange(max_len, device=lengths.device): the mask follows the lengths' device")


@pytest.mark.points(1)
def test_padded_keys_and_values_have_no_influence_in_sdpa(student, gen):
    b, t, s = 3, 4, 6  # queries and keys of different lengths: a padding mask only looks at the keys
    lengths = torch.randint(1, s + 1, (b,), generator=gen)
    lengths[0] = 2
    q, k, v = qkv(gen, b, t, s)
    mask = student.masks.padding_mask(lengths, s)
    expect_bool_mask(mask, (b, s), f"padding_mask(lengths={lengths.tolist()}, max_len={s})", PAD_HINT)
    keep = mask[:, None, None, :]  # (B, 1, 1, S): broadcast over heads and queries
    pad = ~(torch.arange(s)[None, :] < lengths[:, None])  # (B, S), the true padding positions
    noise_k = 10 * torch.randn(b, 2, s, 4, generator=gen) * pad[:, None, :, None]
    noise_v = 10 * torch.randn(b, 2, s, 4, generator=gen) * pad[:, None, :, None]
    before = sdpa(q, k, v, attn_mask=keep)
    after = sdpa(q, k + noise_k, v + noise_v, attn_mask=keep)
    for row in range(b):
        if not torch.allclose(before[row], after[row], atol=1e-6, rtol=0):
            fail(f"sequence {row} (length {int(lengths[row])} of {s}): changing its padded keys/values changed the "
                 "attention output, so the mask lets queries attend to padding", PAD_HINT)
    expected = sdpa(q, k, v, attn_mask=~pad[:, None, None, :])
    expect_tensor(before, expected, what="SDPA with attn_mask=padding_mask(...)[:, None, None, :]", hint=PAD_HINT)


# ---------------------------------------------------------------- to_additive

@pytest.mark.points(1)
def test_to_additive_is_zero_where_true_and_exactly_minus_inf_where_false(student, gen):
    mask = torch.rand(2, 4, 5, generator=gen) < 0.5  # (B, T, S), random pattern
    mask[0, 0] = True
    mask[1, 0] = False  # one fully allowed row, one fully blocked row
    got = student.masks.to_additive(mask)
    expect_shape(got, (2, 4, 5), what="to_additive(mask of shape (2, 4, 5))")
    expect(got.dtype == torch.float32, f"to_additive(mask): got dtype {got.dtype}, expected torch.float32 (the default)")
    if not bool((got[mask] == 0).all()):
        fail(f"to_additive(mask): got {got[mask][got[mask] != 0][:3].tolist()} where the mask is True, expected 0.0",
             "True = may attend, so those scores are left unchanged: add 0.0")
    blocked = got[~mask]
    if not bool(torch.isneginf(blocked).all()):
        fail(f"to_additive(mask): got {blocked[~torch.isneginf(blocked)][:3].tolist()} where the mask is False, "
             "expected exactly -inf", "use float('-inf'): a finite fill like -1e9 still leaks weight on a fully "
             "blocked row and overflows in float16")
    expect_on_input_device(lambda: student.masks.to_additive.on_meta(mask), what="to_additive(mask on meta)",
                           hint="torch.zeros(mask.shape, dtype=dtype, device=mask.device) (or torch.zeros_like)")


@pytest.mark.points(0.5)
@pytest.mark.parametrize("dtype", [torch.float16, torch.float64], ids=["float16", "float64"])
def test_to_additive_honours_dtype(student, gen, dtype):
    mask = torch.rand(3, 6, generator=gen) < 0.5
    mask[:, 0] = True
    got = student.masks.to_additive(mask, dtype=dtype)
    expected = torch.zeros(3, 6, dtype=dtype).masked_fill(~mask, float("-inf"))
    expect_tensor(got, expected, what=f"to_additive(mask, dtype={dtype})",
                  hint="create the result with dtype=dtype; -inf exists in every float dtype, -1e9 overflows float16")


@pytest.mark.points(0.5)
def test_additive_causal_mask_in_sdpa_equals_is_causal(student, gen):
    q, k, v = qkv(gen, 2, 5, 5)
    bias = student.masks.to_additive(torch.ones(5, 5, dtype=torch.bool).tril())
    expect_shape(bias, (5, 5), what="to_additive(tril mask of 5)")
    expect(bias.is_floating_point(), f"to_additive(tril mask of 5): got dtype {bias.dtype}, expected a float dtype",
           "an additive mask holds 0.0 and -inf; returning the bool mask is not converting it")
    expect_tensor(sdpa(q, k, v, attn_mask=bias), sdpa(q, k, v, is_causal=True),
                  what="SDPA(q, k, v, attn_mask=to_additive(causal)) vs SDPA(..., is_causal=True)",
                  hint="SDPA adds a float mask to the scores: 0.0 keeps a position, -inf removes it")


@pytest.mark.points(0.5)
def test_causal_and_padding_masks_combine_into_a_float64_hand_oracle(student, gen):
    b, t = 3, 6
    lengths = torch.randint(1, t + 1, (b,), generator=gen)
    lengths[0] = 1  # query 0 always sees key 0, so no row is fully blocked
    causal = student.masks.causal_mask(t)
    pad = student.masks.padding_mask(lengths, t)
    expect_bool_mask(causal, (t, t), f"causal_mask({t})", CAUSAL_HINT)
    expect_bool_mask(pad, (b, t), f"padding_mask(lengths, {t})", PAD_HINT)
    bias = student.masks.to_additive(causal[None, None] & pad[:, None, None, :], dtype=torch.float64)
    expect_shape(bias, (b, 1, t, t), what="to_additive(causal & padding)")
    q, k, v = (x.double() for x in qkv(gen, b, t, t))
    got = sdpa(q, k, v, attn_mask=bias)
    keep = torch.ones(t, t, dtype=torch.bool).tril()[None, None] & (torch.arange(t) < lengths[:, None])[:, None, None]
    scores = (q @ k.transpose(-2, -1) / 2.0).masked_fill(~keep, float("-inf"))  # scale 1/sqrt(head_dim=4)
    expected = torch.softmax(scores, dim=-1) @ v
    expect_tensor(got, expected, what="SDPA with to_additive(causal_mask & padding_mask) (float64)",
                  hint="AND the keep-masks, (T, T) & (B, 1, 1, S), before converting to additive")
