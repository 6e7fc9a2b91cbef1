"""`softmax` and `simple_attention`'s misconceptions: a softmax along another dim, without keepdim,
without the max subtracted, a plain sum instead of exp; context vectors from the scores or for one
query; a transpose of the wrong dims of a batch; scores scaled as in scaled dot-product attention,
which this exercise does not ask for.

Each variant computes in float64 and is cast to x's dtype, except those whose mistake is numerical
(an overflow, an underflow to 0/0): they run in x's own dtype, so they fail where the student's
code fails and the outputs compare equal, NaNs included."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from grader.testing.catalogue.scales import scale_detector
from grader.testing.diagnosis import Fact, Suspects, Variant
from grader.testing.variants import softmax


def softmax_suspects(x: torch.Tensor, dim: int = -1) -> Suspects:
    """What ``softmax(x, dim)`` gives with each misconception (computed in float64, cast to x's
    dtype, except the overflowing one, which overflows in x's own dtype as the student's does)."""
    x64, n = x.double(), x.dim()
    items: list[Variant] = [
        Variant(
            "softmax-no-keepdim",
            f"exp(x) / exp(x).sum(dim={dim}): the sum without keepdim=True, broadcast "
            "against the wrong axis",
            lambda: softmax(x64, dim, keepdim=False).to(x.dtype),
        ),
        Variant(
            "softmax-no-max",
            "exp(x) / exp(x).sum(dim) without the max subtracted, which overflows here",
            lambda: softmax(x, dim, naive=True),
        ),
        Variant(
            "not-softmax",
            f"x / x.sum(dim={dim}, keepdim=True): the inputs divided by their plain sum, no exp",
            lambda: (x64 / x64.sum(dim=dim, keepdim=True)).to(x.dtype),
        ),
    ]

    def along(other: int) -> Callable[[], torch.Tensor]:
        return lambda: softmax(x64, other).to(x.dtype)

    items += [
        Variant(
            "softmax-wrong-dim",
            f"the softmax along dim {other} instead of dim {dim}" + _front(n, dim, other),
            along(other),
            ("dims-from-front",) if _front(n, dim, other) else (),
        )
        for other in range(n)
        if other != dim % n
    ]
    return Suspects(tuple(items + _shifts(x, dim)), facts=sums_to_one(dim))


def _front(n: int, dim: int, other: int) -> str:
    """Where the right dim is the last of n >= 3 and ``other`` is n - 2: the last dim counted from
    the front of an input without its batch dim (dim=1 written for (T, T) scores, given (B, T, T))."""
    if n >= 3 and dim % n == n - 1 and other == n - 2:
        return f" (dim {other} counted from the front is the last one only without the batch dim)"
    return ""


def _max_over(x: torch.Tensor, d: int | None) -> Callable[[], torch.Tensor]:
    return lambda: x.amax() if d is None else x.amax(dim=d, keepdim=True)


def _shifts(x: torch.Tensor, dim: int) -> list[Variant]:
    """The max subtracted wrongly, in x's own dtype (numerical: see the module's docstring):
    over the whole tensor or along another dim (no longer a constant of each slice), or in the
    numerator only; or the right shift with the sum along another dim."""
    n = dim % x.dim()

    def shifted_by(
        m: Callable[[], torch.Tensor], den_shifted: bool = True, summed: int = dim
    ) -> Callable[[], torch.Tensor]:
        # lazily: a max that cannot broadcast raises as the student's does
        def go() -> torch.Tensor:
            num = torch.exp(x - m())
            return num / (num if den_shifted else torch.exp(x)).sum(summed, keepdim=True)

        return go

    items = [
        Variant(
            "softmax-no-keepdim",
            f"exp(x - x.max(dim={dim})) without keepdim=True: the max broadcast against the wrong axis",
            shifted_by(lambda: x.amax(dim=dim)),
        )
    ]
    where = {
        "the whole tensor (x.max())": None,
        **{f"dim {d}": d for d in range(x.dim()) if d != n},
    }
    items += [
        Variant(
            "softmax-wrong-dim",
            f"exp(x - max) normalised along dim {dim}, with the max taken over {over} instead of "
            f"along dim {dim}",
            shifted_by(_max_over(x, d)),
        )
        for over, d in where.items()
    ]
    items += [
        Variant(
            "softmax-wrong-dim",
            f"exp(x - x.max(dim={dim})) summed along dim {d} instead of dim {dim}",
            shifted_by(lambda: x.amax(dim=dim, keepdim=True), summed=d),
        )
        for d in range(x.dim())
        if d != n
    ]
    items.append(
        Variant(
            "softmax-no-max",
            f"exp(x - max) / exp(x).sum(dim={dim}): the max subtracted in the numerator only",
            shifted_by(lambda: x.amax(dim=dim, keepdim=True), den_shifted=False),
        )
    )
    return items


def weights_suspects(scores: torch.Tensor) -> Suspects:
    """``attention_weights(scores)``: a softmax's misconceptions, and scores scaled by any factor
    first (simple attention asks for none; a fitted one,
    :mod:`~grader.testing.catalogue.scales`)."""
    s64 = scores.double()
    fitted = scale_detector(
        lambda c: softmax(s64 * c, -1).to(scores.dtype),
        1.0,
        {"T": scores.shape[-1]},
        scores.numel(),
    )
    return softmax_suspects(scores) + Suspects((fitted,))


def sums_to_one(dim: int) -> tuple[Fact, ...]:
    return (
        Fact("all values finite", lambda got: bool(torch.isfinite(got).all())),
        Fact("all values in [0, 1]", lambda got: bool(((got >= 0) & (got <= 1)).all())),
        Fact(
            f"each slice along dim {dim} sums to 1",
            lambda got: bool(
                torch.allclose(
                    got.double().sum(dim), torch.ones((), dtype=torch.float64), atol=1e-4
                )
            ),
        ),
    )


def context_suspects(x: torch.Tensor) -> Suspects:
    """What ``softmax(x x^T) x`` gives with each misconception."""
    x64 = x.double()
    scores = x64 @ x64.transpose(-2, -1)
    items = [
        Variant(
            "context-from-scores",
            "scores @ inputs: the unnormalised scores in place of the weights",
            lambda: (scores @ x64).to(x.dtype),
        ),
        Variant(
            "not-softmax",
            "(scores / scores.sum(-1)) @ inputs: weights without exp",
            lambda: ((scores / scores.sum(-1, keepdim=True)) @ x64).to(x.dtype),
        ),
        Variant(
            "softmax-no-max",
            "the weights from exp(scores) without the max subtracted, which overflows here",
            lambda: softmax(x @ x.transpose(-2, -1), -1, naive=True) @ x,
        ),
        Variant(
            "context-single-query",
            "the context vector of query 1 alone (the seed's context_vec_2)",
            lambda: (softmax(scores[..., 1, :], -1)[..., None, :] @ x64)[..., 0, :].to(x.dtype),
        ),
    ]

    def along(other: int) -> Callable[[], torch.Tensor]:
        return lambda: (softmax(scores, other) @ x64).to(x.dtype)

    items += [
        Variant(
            "softmax-wrong-dim",
            f"the weights from a softmax along dim {other} instead of the keys' (the last)",
            along(other),
        )
        for other in range(x.dim() - 1)
    ]
    items.append(
        Variant(
            "softmax-wrong-dim",
            "the weighted sum taken over the queries instead of the keys: input j times the weight "
            "all queries give it, (weights.sum(dim=-2)[..., None] * inputs)",
            lambda: (softmax(scores, -1).sum(dim=-2)[..., None] * x64).to(x.dtype),
        )
    )
    items += [
        Variant(
            "wrong-scale",
            f"softmax(scores * {name}) @ inputs: the scores scaled, which this exercise does not ask",
            scaled(lambda f: (softmax(scores * f, -1) @ x64).to(x.dtype), factor),
        )
        for name, factor in unasked_scales(x.shape[-1]).items()
    ]
    return Suspects(tuple(items))


def scaled(compute: Callable[[float], torch.Tensor], factor: float) -> Callable[[], torch.Tensor]:
    return lambda: compute(factor)


def unasked_scales(d: int) -> dict[str, float]:
    """The factors of scaled dot-product attention, which simple attention (plain dot products) does
    not use."""
    return {f"1/sqrt(d) = 1/sqrt({d})": 1 / math.sqrt(d), f"1/d = 1/{d}": 1 / d} if d > 1 else {}


def scores_suspects(x: torch.Tensor) -> Suspects:
    """What ``x x^T`` gives with each misconception: `.T`, which reverses every dim of a batched
    tensor; the seed's double loop over one sequence's tokens into ``torch.zeros(T, T)`` (float32,
    one sequence only)."""
    x64 = x.double()
    return Suspects(
        (
            Variant(
                "keys-dot-t",
                "inputs @ inputs.T, where .T reverses every dim of a batched tensor",
                lambda: (x64 @ x64.permute(*range(x.dim() - 1, -1, -1))).to(x.dtype),
            ),
            Variant(
                "keys-dot-t",
                "inputs @ inputs.transpose(0, 1), which swaps the batch and the tokens of a batch "
                "instead of the last two dims",
                lambda: (x64 @ x64.transpose(0, 1)).to(x.dtype),
            ),
            Variant(
                "keys-dot-t",
                "inputs.transpose(-2, -1) @ inputs: the (d, d) products of the features, not the "
                "(T, T) products of the tokens",
                lambda: (x64.transpose(-2, -1) @ x64).to(x.dtype),
            ),
            *(
                Variant(
                    "wrong-scale",
                    f"inputs @ inputs^T * {name}: the scores scaled, which this exercise does not ask",
                    scaled(lambda f: (x64 @ x64.transpose(-2, -1) * f).to(x.dtype), factor),
                )
                for name, factor in unasked_scales(x.shape[-1]).items()
            ),
            Variant(
                "scores-loop",
                "the seed's double loop, scores[i, j] = torch.dot(x_i, x_j) over the "
                "tokens of ONE sequence into torch.zeros(T, T)",
                lambda: _loop(x),
            ),
        )
    )


def _loop(x: torch.Tensor) -> torch.Tensor:
    """Seed 001's scores: a loop over the rows of a (T, d) tensor, into a float32 torch.zeros
    (torch.dot raises for the rows of a batch, as the student's does)."""
    scores = torch.zeros(x.shape[-2], x.shape[-2])
    for i, x_i in enumerate(x):
        for j, x_j in enumerate(x):
            scores[i, j] = torch.dot(x_i, x_j)
    return scores
