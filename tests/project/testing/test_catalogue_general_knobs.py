"""Variants added as general knobs for the classes a fourth blind set of bugs showed: the max subtracted along the
wrong axis or without keepdim, a weighted sum over the queries, 0 * -inf, heads split strided or softmaxed over,
a padding mask added as floats or multiplied into the keys and values, a band tile masked wrongly, a float causal
mask, rows without keys left NaN, and the flash backward's P, D and dK slips. Each diagnosis is named on an output
written here the way a learner writes it (not by the catalogue's formulas), and never on the right output."""

from __future__ import annotations

import math
import re

import pytest
import torch
import torch.nn.functional as F

from grader.testing.catalogue.efficient import formula_suspects
from grader.testing.catalogue.flash_backward import backward_suspects
from grader.testing.catalogue.masks import additive_suspects
from grader.testing.catalogue.modules import cross_suspects, mha_suspects
from grader.testing.catalogue.softmax import context_suspects, softmax_suspects
from grader.testing.catalogue.window import banded_suspects, keep
from grader.testing.checks import caps_observed
from grader.testing.diagnosis import Suspects
from grader.testing.regimes import expect_stable
from tests.project.testing.test_catalogue_modules import cross_case, params, raised

F32 = (1e-5, 1e-4)


def ids(said: str | None) -> set[str]:
    found = re.findall(r"diagnosis \[([a-z0-9, -]+)\]", said or "")
    return {i for f in found for i in f.split(", ")}


def named(suspects: Suspects, got: torch.Tensor, want: torch.Tensor) -> set[str]:
    return ids(suspects.explain(got, want, *F32))


# ----------------------------------------------------------------------------------------------- softmax
def test_the_max_subtracted_wrongly_is_named_by_where_it_was_taken() -> None:
    torch.manual_seed(0)
    x = (torch.rand(4, 9) * 2 - 1) * 1000
    right = torch.softmax(x.double(), -1).float()
    shifted = torch.exp(x - x.max())  # the global max: far rows underflow to 0 / 0
    assert named(softmax_suspects(x, -1), shifted / shifted.sum(-1, keepdim=True), right) == {
        "softmax-wrong-dim"
    }
    y = torch.randn(5, 7)
    want = torch.softmax(y.double(), -1).float()
    numerator_only = torch.exp(y - y.max(-1, keepdim=True).values) / torch.exp(y).sum(
        -1, keepdim=True
    )
    assert named(softmax_suspects(y, -1), numerator_only, want) == {"softmax-no-max"}
    assert named(softmax_suspects(y, -1), want.clone(), want) == set()


def test_the_max_without_keepdim_is_named_and_raises_as_the_learners_does() -> None:
    torch.manual_seed(1)
    s = torch.randn(5, 5)  # square, not symmetric: the max of row j subtracted from column j
    e = torch.exp(s - s.max(dim=-1).values)
    want = torch.softmax(s.double(), -1).float()
    assert named(softmax_suspects(s), e / e.sum(-1, keepdim=True), want) == {"softmax-no-keepdim"}
    batch = torch.randn(2, 5, 5)  # (2, 5) against (2, 5, 5): cannot broadcast
    error = raised(lambda: torch.exp(batch - batch.max(dim=-1).values))
    assert ids(softmax_suspects(batch).explain_error(error)) == {"softmax-no-keepdim"}


def test_a_weighted_sum_over_the_queries_is_named() -> None:
    torch.manual_seed(2)
    x = torch.randn(5, 3)
    w = torch.softmax(x @ x.T, dim=-1)
    got = (w[:, :, None] * x[None, :, :]).sum(dim=0)  # summed over the queries
    assert named(context_suspects(x), got, w @ x) == {"softmax-wrong-dim"}
    assert named(context_suspects(x), w @ x, w @ x) == set()


def test_an_additive_mask_made_by_multiplying_inf_is_named() -> None:
    mask = torch.rand(2, 4, 5, generator=torch.Generator().manual_seed(3)) < 0.5
    want = torch.zeros(2, 4, 5).masked_fill(~mask, float("-inf"))
    got = (~mask).float() * float("-inf")  # 0 * -inf = NaN where allowed
    assert named(additive_suspects(mask), got, want) == {"mask-multiplied"}
    assert named(additive_suspects(mask), want.clone(), want) == set()


# ----------------------------------------------------------------------------------------------- modules
def mha_forward(m: torch.nn.Module, x: torch.Tensor, bug: str = "") -> torch.Tensor:
    """MultiHeadAttention.forward as a learner writes it, with one mistake."""
    B, T, _ = x.shape
    H, hd = m.num_heads, m.head_dim

    def split(t: torch.Tensor) -> torch.Tensor:
        if bug == "strided":
            return t.view(B, T, hd, H).permute(0, 3, 1, 2)
        return t.view(B, T, H, hd).transpose(1, 2)

    q, k, v = split(m.W_query(x)), split(m.W_key(x)), split(m.W_value(x))
    s = (q @ k.transpose(-2, -1) / math.sqrt(hd)).masked_fill(
        torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")
    )
    w = torch.softmax(s, dim=1 if bug == "over heads" else -1)
    return m.out_proj((w @ v).transpose(1, 2).reshape(B, T, H * hd))


@pytest.mark.parametrize(
    "bug,mid", [("strided", "heads-no-transpose"), ("over heads", "softmax-wrong-dim")]
)
def test_a_heads_slip_is_named_and_the_reference_is_not(bug: str, mid: str) -> None:
    torch.manual_seed(4)
    m = torch.nn.Module()  # the fused module's parameters, by their names
    m.W_query, m.W_key, m.W_value = (torch.nn.Linear(8, 8, bias=False) for _ in range(3))
    m.out_proj, m.num_heads, m.head_dim = torch.nn.Linear(8, 8), 2, 4
    x = torch.randn(2, 5, 8)
    suspects = mha_suspects(x, params(m), 2, context_length=8)
    with torch.no_grad():
        want = mha_forward(m, x)
        assert named(suspects, mha_forward(m, x, bug), want) == {mid}
        assert named(suspects, want.clone(), want) == set()


def cross_padded(m, x, context, keep, how: str) -> torch.Tensor:
    """CrossAttention with the padding mask added as floats, or multiplied into keys and values."""
    B, L, d = x.shape
    H, hd = m.num_heads, m.head_dim
    q, k, v = (
        t.view(B, t.shape[1], H, hd).transpose(1, 2)
        for t in (m.W_query(x), m.W_key(context), m.W_value(context))
    )
    if how == "zeroed":
        k, v = k * keep.view(B, 1, -1, 1), v * keep.view(B, 1, -1, 1)
    s = q @ k.transpose(-2, -1) / math.sqrt(hd)
    if how == "added":
        s = s + keep.float().view(B, 1, 1, -1)
    return m.out_proj((torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, L, d))


@pytest.mark.parametrize("how,mid", [("added", "mask-dtype"), ("zeroed", "mask-multiplied")])
def test_a_padding_mask_used_as_numbers_is_named(how: str, mid: str) -> None:
    m, x, context, keep_ = cross_case(3, 5, [5, 2])
    with torch.no_grad():
        want = m(x, context, keep_)
        got = cross_padded(m, x, context, keep_, how)
    assert named(cross_suspects(x, context, params(m), 2, keep_), got, want) == {mid}


# ----------------------------------------------------------------------------------------------- banded, efficient
def banded_learner(q, k, v, window: int, block: int, tile: str) -> torch.Tensor:
    T, out = q.shape[-2], []
    for start in range(0, T, block):
        end, lo = min(start + block, T), max(0, start - window + 1)
        s = q[..., start:end, :] @ k[..., lo:end, :].transpose(-2, -1) / math.sqrt(q.shape[-1])
        i = torch.arange(start, end)[:, None]
        j = torch.arange(lo, end)[None, :]
        kept = (i - j >= 0) & (i - j < window)
        if tile == "blocked":
            s = s.masked_fill(kept, float("-inf"))
        elif tile != "none":
            s = s.masked_fill(~kept, float("-inf"))
        out.append(torch.softmax(s, -1) @ v[..., lo:end, :])
    return torch.cat(out, dim=-2)


@pytest.mark.parametrize("tile,mid", [("none", "mask-missing"), ("blocked", "mask-inverted")])
def test_a_band_tile_masked_wrongly_is_named(tile: str, mid: str) -> None:
    torch.manual_seed(5)
    q, k, v = torch.randn(1, 2, 13, 4), torch.randn(1, 2, 13, 4), torch.randn(1, 2, 13, 3)
    want = banded_learner(q, k, v, 4, 5, "keep")
    assert torch.allclose(
        want, F.scaled_dot_product_attention(q, k, v, attn_mask=keep(13, 13, 4)), atol=1e-5
    )
    assert named(banded_suspects(q, k, v, 4, 5), banded_learner(q, k, v, 4, 5, tile), want) == {mid}
    assert named(banded_suspects(q, k, v, 4, 5), want.clone(), want) == set()


def test_a_float_causal_mask_and_nan_rows_are_named() -> None:
    torch.manual_seed(6)
    q, k, v = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 7, 4), torch.randn(1, 2, 7, 4)
    right = torch.ones(3, 7, dtype=torch.bool).tril(diagonal=4)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=right)
    floats = F.scaled_dot_product_attention(q, k, v, attn_mask=right.float())  # added, not blocking
    assert named(formula_suspects(q, k, v, is_causal=True), floats, want) == {"mask-dtype"}
    q = torch.randn(1, 2, 7, 4)  # L > S: the first queries see no key
    dead = torch.ones(7, 4, dtype=torch.bool).tril(diagonal=-3)
    s = (q @ k[..., :4, :].transpose(-2, -1) / 2).masked_fill(~dead, float("-inf"))
    nan_rows = torch.softmax(s, -1) @ v[..., :4, :]  # 0 / 0 where no key is allowed
    zero_rows = nan_rows.nan_to_num(0.0)
    suspects = formula_suspects(q, k[..., :4, :], v[..., :4, :], is_causal=True)
    assert named(suspects, nan_rows, zero_rows) == {"fully-masked-nan"}
    assert named(suspects, zero_rows.clone(), zero_rows) == set()


# ----------------------------------------------------------------------------------------------- flash backward
def learner_backward(q, k, v, o, lse, do, block: int, bug: str) -> tuple[torch.Tensor, ...]:
    """The tiled backward as a learner writes it (not causal), with one mistake."""
    scale = 1 / math.sqrt(q.shape[-1])
    d = (do * o).sum(-1, keepdim=True)
    if bug == "d from do":
        d = (do * do).sum(-1, keepdim=True)
    dq, dks, dvs = torch.zeros_like(q), [], []
    for start in range(0, k.shape[-2], block):
        kt, vt = k[..., start : start + block, :], v[..., start : start + block, :]
        s = q @ kt.transpose(-2, -1) * (1.0 if bug == "unscaled" else scale)
        p = torch.exp(s) if bug == "raw" else torch.exp(s - lse.unsqueeze(-1))
        dp = do @ vt.transpose(-2, -1)
        ds = p * (dp - d)
        dq = dq + ds @ kt * scale
        dks.append(ds.transpose(-2, -1) @ q * scale)
        dvs.append(p.transpose(-2, -1) @ do)
    dim = -1 if bug == "cat" else -2
    return dq, torch.cat(dks, dim=dim), torch.cat(dvs, dim=dim)


@pytest.mark.parametrize(
    "bug,mid",
    [("raw", "bwd-probabilities"), ("unscaled", "bwd-probabilities"), ("d from do", "bwd-delta")],
)
def test_a_flash_backward_slip_is_named_and_the_right_one_is_not(bug: str, mid: str) -> None:
    torch.manual_seed(7)
    q, k, v = (torch.randn(1, 2, n, 5, dtype=torch.float64) for n in (6, 13, 13))
    do = torch.randn(1, 2, 6, 5, dtype=torch.float64)
    s = q @ k.transpose(-2, -1) / math.sqrt(5)
    o, lse = torch.softmax(s, -1) @ v, torch.logsumexp(s, -1)
    want = learner_backward(q, k, v, o, lse, do, 4, "")[0]
    suspects = backward_suspects(q, k, v, o, lse, do, False, 4, 0)
    assert ids(
        suspects.explain(learner_backward(q, k, v, o, lse, do, 4, bug)[0], want, 1e-10, 1e-7)
    ) == {mid}
    assert suspects.explain(want.clone(), want, 1e-10, 1e-7) == ""
    error = raised(
        lambda: learner_backward(q, k, v, o, lse, do, 4, "cat")
    )  # 13 = 3 * 4 + 1: ragged
    assert ids(backward_suspects(q, k, v, o, lse, do, False, 4, 1).explain_error(error)) == {
        "concat-wrong-dim"
    }


# ----------------------------------------------------------------------------------------------- the cap
def _break(call, suspects=None) -> BaseException:
    ordinary = torch.randn(4, 9)
    with pytest.raises(BaseException) as info:
        expect_stable(
            lambda: call(X_LARGE), lambda: call(ordinary), what="softmax", suspects=suspects
        )
    return info.value


X_LARGE = (torch.rand(4, 9, generator=torch.Generator().manual_seed(8)) * 2 - 1) * 1000


def _global(x: torch.Tensor) -> torch.Tensor:
    e = torch.exp(x - x.max())
    return e / e.sum(-1, keepdim=True)


def _naive(x: torch.Tensor) -> torch.Tensor:
    return torch.exp(x) / torch.exp(x).sum(-1, keepdim=True)


def test_the_cap_is_for_an_overflow_and_another_break_is_named_without_it() -> None:
    suspects = (softmax_suspects(X_LARGE, -1), torch.softmax(X_LARGE.double(), -1).float())
    other = _break(_global, suspects)  # NaN on large scores, from the max over the whole tensor
    assert ids(str(other)) == {"softmax-wrong-dim"} and caps_observed(other) is None
    overflow = _break(_naive, suspects)
    assert ids(str(overflow)) == {"softmax-no-max"} and caps_observed(overflow)
    unexplained = _break(_global)  # no suspects: the cap's own class, as before
    assert ids(str(unexplained)) == {"softmax-no-max"} and caps_observed(unexplained)
