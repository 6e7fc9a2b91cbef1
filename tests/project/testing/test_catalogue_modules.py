"""The attention modules' catalogue (:mod:`grader.testing.catalogue.modules`, on :mod:`~.heads`): cross-attention's
projections and padding mask, the decay of decaying attention, gamma's initial value, the ALiBi slopes and the
causal mask's diagonal. Each diagnosis is named on a bug written here the way a learner writes it (a reference
module with one mistake in its forward, independent of the catalogue's formulas) and never on the reference."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from types import ModuleType

import pytest
import torch

from grader.protocol.errors import StudentError
from grader.testing import misconceptions
from grader.testing.catalogue.decaying import (
    decaying_suspects,
    gamma_init_suspects,
    slopes_suspects,
)
from grader.testing.catalogue.modules import causal_suspects, cross_suspects
from grader.testing.diagnosis import Suspects
from tests.project.support.common import ROOT
from tests.project.testing.test_catalogue_rope import load  # a module loaded by path

F32 = (1e-5, 1e-4)  # what the hidden suites allow a float32 output


def ids(said: str | None) -> set[str]:
    return {
        i
        for found in re.findall(r"diagnosis \[([a-z0-9, -]+)\]", said or "")
        for i in found.split(", ")
    }


def named(suspects: Suspects, got: torch.Tensor, want: torch.Tensor) -> set[str]:
    return ids(suspects.explain(got, want, *F32))


def solution(name: str) -> ModuleType:
    return load(ROOT / "solutions" / f"{name}.py")


def params(m: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: t.detach().clone() for n, t in m.named_parameters()}


def raised(call: Callable[[], object]) -> StudentError:
    """What the worker sends back for a call that raises: the exception's type name and message."""
    with pytest.raises(Exception) as info:
        call()
    return StudentError(str(info.value), exc_type=type(info.value).__name__)


# ----------------------------------------------------------------------------------------------- cross-attention
def cross_forward(m, x, context, keep=None, *, bug: str = ""):
    """CrossAttention.forward as a learner writes it, with the one mistake ``bug`` names."""
    B, d = x.shape[0], x.shape[-1]
    src_q, src_k, src_v = x, context, context
    if bug == "roles":
        src_q, src_k, src_v = context, x, x
    src_k = x if bug == "keys from x" else src_k
    src_v = x if bug == "values from x" else src_v
    H, hd = m.num_heads, m.head_dim

    def heads(t: torch.Tensor) -> torch.Tensor:
        return t.view(B, t.shape[1], H, hd).transpose(1, 2)

    q, k, v = heads(m.W_query(src_q)), heads(m.W_key(src_k)), heads(m.W_value(src_v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
    if keep is not None and bug == "multiply":
        scores = scores * keep[:, None, None, :].float()  # 0 for padding, as if 0 blocked it
    elif keep is not None and bug == "over queries":
        scores = scores.masked_fill(~keep.view(B, 1, -1, 1), float("-inf"))
    elif keep is not None and bug != "after softmax":
        scores = scores.masked_fill(~keep[:, None, None, :], float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if keep is not None and bug == "after softmax":
        weights = weights * keep[:, None, None, :]
    out = (weights @ v).transpose(1, 2).reshape(B, -1, d)
    return m.out_proj(out)


def cross_case(L: int, S: int, lengths: list[int] | None = None):
    torch.manual_seed(3)
    m = solution("cross_attention").CrossAttention(8, 2).eval()
    gen = torch.Generator().manual_seed(4)
    x, context = torch.randn(2, L, 8, generator=gen), torch.randn(2, S, 8, generator=gen)
    keep = None if lengths is None else torch.arange(S)[None, :] < torch.tensor(lengths)[:, None]
    return m, x, context, keep


CROSS_BUGS = [  # (bug, L, S, lengths, misconception)
    ("roles", 3, 5, None, "kv-from-x"),
    ("roles", 4, 4, None, "kv-from-x"),
    ("keys from x", 4, 4, None, "kv-from-x"),
    ("values from x", 4, 4, None, "kv-from-x"),
    ("multiply", 3, 5, [5, 2], "mask-multiplied"),
    ("after softmax", 3, 5, [5, 2], "mask-after-softmax"),
    ("over queries", 5, 5, [5, 2], "mask-broadcast"),
]


@pytest.mark.parametrize("bug,L,S,lengths,mid", CROSS_BUGS)
def test_a_cross_attention_bug_is_named_and_the_reference_is_not(bug, L, S, lengths, mid):
    m, x, context, keep = cross_case(L, S, lengths)
    suspects = cross_suspects(x, context, params(m), 2, keep)
    with torch.no_grad():
        want = m(x, context, keep)
        assert named(suspects, cross_forward(m, x, context, keep, bug=bug), want) == {mid}
        assert named(suspects, cross_forward(m, x, context, keep), want) == set()


@pytest.mark.parametrize(
    "bug,lengths,mid",
    [
        ("over queries", [5, 2], "mask-broadcast"),
        ("keys from x", None, "kv-from-x"),
        ("values from x", None, "kv-from-x"),
    ],
)
def test_a_cross_attention_bug_that_raises_when_L_differs_from_S_is_named(bug, lengths, mid):
    m, x, context, keep = cross_case(3, 5, lengths)
    with torch.no_grad():
        error = raised(lambda: cross_forward(m, x, context, keep, bug=bug))
    assert ids(cross_suspects(x, context, params(m), 2, keep).explain_error(error)) == {mid}


# ----------------------------------------------------------------------------------------------- decaying attention
def decaying_forward(m, x, *, decay: Callable[[torch.Tensor], torch.Tensor], after: str = ""):
    """DecayingAttention.forward as a learner writes it: ``decay(pos)`` is their distance matrix; ``after``: the
    decay multiplied into the weights after the softmax ("times") or into the scores ("scores")."""
    B, L, C = x.shape
    H, hd = m.num_heads, m.head_dim
    q, k, v = m.qkv(x).reshape(B, L, 3, H, hd).permute(2, 0, 3, 1, 4)
    scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
    penalty = m.gamma * decay(torch.arange(L)).float()
    if after == "scores":
        scores = scores * torch.exp(-penalty)
    elif after != "times":
        scores = scores - penalty
    weights = torch.softmax(scores, dim=-1)
    if after == "times":
        weights = weights * torch.exp(-penalty)
    return (weights @ v).transpose(1, 2).reshape(B, L, C)


def absolute(p: torch.Tensor) -> torch.Tensor:
    return (p[:, None] - p[None, :]).abs()


DECAY_BUGS = [  # (the learner's distance, where the decay goes, misconception)
    (lambda p: (p[:, None] - p[None, :]) ** 2, "", "decay-sign"),
    (lambda p: (p[:, None] - p[None, :]).clamp(min=0), "", "decay-sign"),
    (lambda p: p[None, :] - p[:, None], "", "decay-sign"),
    (absolute, "times", "decay-misapplied"),
    (absolute, "scores", "decay-misapplied"),
]


def decaying_case():
    torch.manual_seed(5)
    m = solution("decaying_attention").DecayingAttention(8, 2)
    with torch.no_grad():
        m.gamma.copy_(torch.tensor([0.3, 1.2]).view(2, 1, 1))
    return m, torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(6))


@pytest.mark.parametrize("decay,after,mid", DECAY_BUGS)
def test_a_decay_bug_is_named_and_the_reference_is_not(decay, after, mid):
    m, x = decaying_case()
    suspects = decaying_suspects(x, params(m), 2)
    with torch.no_grad():
        want = m(x)
        assert named(suspects, decaying_forward(m, x, decay=decay, after=after), want) == {mid}
        assert named(suspects, decaying_forward(m, x, decay=absolute), want) == set()


@pytest.mark.parametrize(
    "start", [torch.zeros(3, 1, 1), torch.full((3, 1, 1), 0.5), torch.rand(3, 1, 1)]
)
def test_a_gamma_not_started_at_ones_is_named_and_ones_are_not(start):
    ones = torch.ones(3, 1, 1)
    assert named(gamma_init_suspects(), start, ones) == {"gamma-init"}
    assert (
        named(
            gamma_init_suspects(),
            solution("decaying_attention").DecayingAttention(12, 3).gamma,
            ones,
        )
        == set()
    )


def slopes_from_zero(n: int) -> torch.Tensor:
    """A learner's slopes with h counted from 0 in the power-of-two rule, kept for every n."""

    def pow2(m: int) -> list[float]:
        return [2 ** (-8 * h / m) for h in range(m)]

    c = 1 << (n.bit_length() - 1)
    return torch.tensor(pow2(c) + (pow2(2 * c)[::2][: n - c] if c != n else []))


def slopes_odd(n: int) -> torch.Tensor:
    """A learner's slopes taking the extra ones at the odd indices of the 2c rule."""
    c = 1 << (n.bit_length() - 1)
    extra = [2 ** (-8 * h / (2 * c)) for h in range(1, 2 * c + 1)][1::2][: n - c]
    return torch.tensor([2 ** (-8 * h / c) for h in range(1, c + 1)] + extra)


@pytest.mark.parametrize(
    "bug,n", [(slopes_from_zero, 4), (slopes_from_zero, 12), (slopes_odd, 12), (slopes_odd, 6)]
)
def test_a_slopes_bug_is_named_and_the_reference_is_not(bug, n):
    right = solution("decaying_attention").alibi_slopes(n)
    assert named(slopes_suspects(n), bug(n), right) == {"slopes-wrong"}
    assert named(slopes_suspects(n), right.clone(), right) == set()


# ----------------------------------------------------------------------------------------------- causal attention
def causal_case(d_in: int, context_length: int, dropout: float):
    """A reference CausalAttention(d_in, 4, context_length, dropout) in eval mode, x (2, 5, d_in), its suspects."""
    torch.manual_seed(7)
    m = solution("causal_attention").CausalAttention(d_in, 4, context_length, dropout).eval()
    x = torch.randn(2, 5, d_in, generator=torch.Generator().manual_seed(8))
    return m, x, causal_suspects(x, params(m), context_length=context_length)


def test_a_causal_mask_without_its_diagonal_is_named_and_the_reference_is_not():
    m, x, suspects = causal_case(6, 8, 0.0)
    with torch.no_grad():
        want = m(x)
        m.mask.copy_(
            torch.tril(torch.ones(8, 8, dtype=torch.bool), diagonal=-1)
        )  # j < i: itself blocked
        assert named(suspects, m(x), want) == {"mask-diagonal"}
    assert named(suspects, want.clone(), want) == set()


def test_every_id_the_catalogue_names_is_in_the_registry():
    m, x, context, keep = cross_case(3, 5, [5, 2])
    d, dx = decaying_case()
    found = [cross_suspects(x, context, params(m), 2, keep), decaying_suspects(dx, params(d), 2)]
    found += [slopes_suspects(12), gamma_init_suspects()]
    for suspects in found:
        for item in suspects.items:
            for mid in getattr(item, "ids", item.id).split(", "):
                assert mid in misconceptions.BY_ID


def test_dropout_left_on_in_eval_mode_is_named_and_the_reference_is_not():
    m, x, suspects = causal_case(4, 7, 0.1)
    with torch.no_grad():
        want = m(x)
        q, k, v = m.W_query(x), m.W_key(x), m.W_value(x)
        scores = (q @ k.transpose(1, 2)).masked_fill(~m.mask[:5, :5], float("-inf"))
        weights = torch.nn.functional.dropout(
            torch.softmax(scores / 2, dim=-1), 0.1
        )  # training=True
        got = weights @ v
    assert not torch.allclose(got, want)  # this draw dropped a weight
    assert named(suspects, got, want) == {"dropout-in-eval"}
    assert named(suspects, want.clone(), want) == set()
    assert named(suspects, want * 1.25, want) == set()  # a scaled output drops nothing
