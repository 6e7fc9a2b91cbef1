"""Decaying attention's misconceptions (the decay's sign, distance and place, gamma's axis and
start, the fused qkv split) and ALiBi's slopes: :class:`~grader.testing.catalogue.heads.Spec` knobs
on the module's own parameters, as for the other modules
(:mod:`~grader.testing.catalogue.modules`)."""

from __future__ import annotations

import math

import torch

from grader.testing.catalogue.heads import Params, Spec, forward, module_variants
from grader.testing.catalogue.modules import bind, distinct_scales, unfused
from grader.testing.diagnosis import Detector, Suspects, Variant


def decaying_suspects(x: torch.Tensor, p: Params, heads: int) -> Suspects:
    """``DecayingAttention``: the fused qkv split into q, k, v; scores minus gamma[h] |i - j| after
    the scaling; no mask, no out_proj (its parameters: ``qkv.weight``, ``qkv.bias``, ``gamma`` of
    shape (H, 1, 1))."""
    d, L = x.shape[-1], x.shape[-2]
    gamma = (
        p["gamma"].double().reshape(-1, 1, 1)
        if "gamma" in p
        else torch.ones(heads, 1, 1, dtype=torch.float64)
    )
    i = torch.arange(L, dtype=torch.float64)
    dist = (i[:, None] - i[None, :]).abs()
    fused, spec = unfused(p, heads, "[q | k | v]"), Spec(heads=heads, out_proj=False)
    hd = d // heads

    def run(q: Params = fused, bias: torch.Tensor = -gamma * dist, s: Spec = spec) -> torch.Tensor:
        return forward(x, q, s, bias=bias)

    signed = i[:, None] - i[None, :]  # i - j: positive for keys in the past
    items = [
        Variant(mid, f"the output of this module with {shows}", bind(run, bias=bias))
        for mid, shows, bias in (
            ("decay-sign", "+gamma * |i - j| (far tokens get MORE weight)", gamma * dist),
            ("decay-sign", "-gamma * (i - j), the signed distance", -gamma * signed),
            ("decay-sign", "-gamma * (j - i), the signed distance", gamma * signed),
            ("decay-sign", "-gamma * (i - j)**2, the squared distance", -gamma * signed**2),
            (
                "decay-sign",
                "the decay on past keys only, -gamma * max(i - j, 0)",
                -gamma * signed.clamp(min=0),
            ),
            (
                "decay-sign",
                "the decay on future keys only, -gamma * max(j - i, 0)",
                gamma * signed.clamp(max=0),
            ),
            (
                "bias-before-scale",
                "the decay added before the scaling (divided by sqrt(head_dim) too)",
                -gamma * dist / math.sqrt(hd),
            ),
        )
    ]
    items += [
        Variant(
            "decay-misapplied",
            f"the output of this module with {shows}",
            bind(run, s=Spec(heads=heads, out_proj=False, bias_on=on)),
        )
        for on, shows in (
            (
                "scores-times",
                "the scores multiplied by exp(-gamma * |i - j|) instead of the decay added",
            ),
            (
                "weights-times",
                "the weights multiplied by exp(-gamma * |i - j|) after the softmax, not renormalised",
            ),
            (
                "weights",
                "-gamma * |i - j| added to the weights after the softmax instead of to the scores",
            ),
        )
    ]
    items.append(
        Variant(
            "gamma-wrong-axis",
            "the decay gamma.view(1, 1, H, 1) * |i - j|: each gamma scales a QUERY "
            "position instead of a head",
            lambda: run(bias=-(gamma.view(1, 1, -1, 1) * dist)),
        )
    )
    items.append(
        Variant(
            "qkv-split-layout",
            "qkv(x) split as reshape(B, L, H, 3, head_dim): q, k and v "
            "interleaved per head instead of [q | k | v]",
            bind(run, q=unfused(p, heads, "per head")),
        )
    )
    items += [
        Variant(
            "wrong-scale",
            f"the scores scaled by {name} instead of 1/sqrt(head_dim)",
            bind(run, s=Spec(heads=heads, out_proj=False, scale=factor)),
        )
        for name, factor in distinct_scales(
            {f"1/sqrt(embed_dim) = 1/sqrt({d})": 1 / math.sqrt(d)}, hd
        ).items()
    ]
    items += [
        Variant(mid, f"the output of this module with {shows}", thunk)
        for mid, shows, thunk in module_variants(spec, ["softmax", "heads"], lambda s: run(s=s))
    ]  # the softmax's and the heads' layout slips, as in every multi-head module
    return Suspects(tuple(items))


def decaying_forward(x: torch.Tensor, p: Params, heads: int) -> torch.Tensor:
    """``DecayingAttention``'s right output by formula (float64 inside, x's dtype out)."""
    i = torch.arange(x.shape[-2], dtype=torch.float64)
    gamma = p["gamma"].double().reshape(-1, 1, 1)
    return forward(
        x,
        unfused(p, heads, "[q | k | v]"),
        Spec(heads=heads, out_proj=False),
        bias=-gamma * (i[:, None] - i[None, :]).abs(),
    )


def gamma_init_suspects() -> Suspects:
    """A fresh module's gamma, whose value check fails only when it is not all ones: that is the
    misconception."""

    def not_ones(got: torch.Tensor, expected: torch.Tensor) -> str | None:
        if got.shape != expected.shape or bool(torch.equal(got.double(), expected.double())):
            return None
        shown = ", ".join(f"{v:.4g}" for v in got.detach().double().flatten()[:4].tolist())
        return f"gamma starts as [{shown}{', ...' if got.numel() > 4 else ''}], not ones: torch.ones(num_heads, 1, 1)"

    return Suspects((Detector("gamma-init", not_ones),))


def slopes_suspects(n: int) -> Suspects:
    """``alibi_slopes(n)``: the slopes reversed, 2 ** (-8h/n) for every n (the power-of-two rule
    everywhere), h counted from 0 instead of 1, or the odd slopes of alibi_slopes(2c) interleaved
    instead of the even ones."""
    naive = torch.tensor([2.0 ** (-8.0 * h / n) for h in range(1, n + 1)])
    right = torch.tensor(_slopes(n))
    from_zero = (
        Variant(
            "slopes-wrong",
            f"2 ** (-8h / {n}) for h = 0..{n - 1}: h counted from 0 instead of 1",
            lambda: torch.tensor([2.0 ** (-8.0 * h / n) for h in range(n)]),
        ),
        Variant(
            "slopes-wrong",
            "the slopes with h counted from 0 instead of 1 in each power-of-two rule",
            lambda: torch.tensor(_slopes(n, first=0)),
        ),
        Variant(
            "slopes-wrong",
            "the extra slopes taken at the odd indices of alibi_slopes(2c) ([1::2]) instead of the even",
            lambda: torch.tensor(_slopes(n, odd=True)),
        ),
    )
    return Suspects(
        (
            Variant(
                "slopes-wrong",
                "the slopes in reverse order (smallest first)",
                lambda: right.flip(0),
            ),
            Variant(
                "slopes-wrong",
                f"2 ** (-8h / {n}) for h = 1..{n}: the power-of-two rule, which the paper "
                "replaces for other n",
                lambda: naive,
            ),
            *from_zero,
        )
    )


def _slopes(n: int, *, first: int = 1, odd: bool = False) -> list[float]:
    """Press et al.'s slopes (``first``: the h each power-of-two rule starts at; ``odd``: the extra
    slopes from the odd indices of the 2c rule)."""

    def pow2(m: int) -> list[float]:
        return [2.0 ** (-8.0 * h / m) for h in range(first, m + first)]

    c = 2 ** math.floor(math.log2(n))
    return pow2(c) if c == n else pow2(c) + pow2(2 * c)[int(odd) :: 2][: n - c]
