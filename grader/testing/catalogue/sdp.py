"""`scaled_dot_product`'s misconceptions (and every exercise's that calls attention on q, k, v
directly): the scale, the softmax's dim, `.T`, the mask's meaning, an additive mask read as a
boolean one or added before the scaling, a squeezed mask, NaN or -1e9 for rows with no key, an
overflowing exp."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from grader.testing.catalogue.scales import scale_detector
from grader.testing.diagnosis import Suspects, Variant
from grader.testing.variants import attention

Part = int  # 0: the output, 1: the weights


def sdp_suspects(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    mask: torch.Tensor | None = None,
    scale: float | None = None,
    part: Part = 0,
) -> Suspects:
    """What ``scaled_dot_product_attention(q, k, v, mask, scale=scale)[part]`` gives with each
    misconception."""
    E = q.shape[-1]
    keep, bias = (mask, None) if mask is None or mask.dtype == torch.bool else (None, mask)

    def wrong(**knobs: object) -> Callable[[], torch.Tensor]:
        base: dict[str, object] = {"scale": scale, "keep": keep, "bias": bias}
        return lambda: attention(q, k, v, **{**base, **knobs})[part].to(q.dtype)  # type: ignore[arg-type]

    items = [
        Variant(
            "softmax-no-max",
            "attention with exp(scores) not shifted by the row max, which overflows here",
            lambda: attention(
                q, k, v, scale=scale, keep=keep, bias=bias, naive=True, dtype=q.dtype
            )[part],
        ),
        Variant(
            "keys-dot-t",
            "query @ key.T, where .T reverses every dim of a batched key",
            lambda: q.double() @ k.double().permute(*range(k.dim() - 1, -1, -1)),
        ),
    ]
    items += _scales(E, scale, wrong)
    items += [
        Variant(
            "softmax-wrong-dim",
            f"attention with the softmax over dim {d} (the queries) instead of the keys' (-1)",
            wrong(softmax_dim=d),
        )
        for d in (-2,)
        if q.shape[-2] > 1
    ]
    items += _masks(keep, bias, wrong, q.dtype)
    if (
        scale is None
    ):  # any other constant factor: fitted (an explicit scale's misreadings are above)
        sizes = {"E": E, "Ev": v.shape[-1], "L": q.shape[-2], "S": k.shape[-2]}
        work = q.numel() // E * k.shape[-2]  # scores per run
        fitted = scale_detector(lambda c: wrong(scale=c)(), 1 / math.sqrt(E), sizes, work)
        return Suspects((*items, fitted))
    return Suspects(tuple(items))


def _scales(
    E: int, scale: float | None, wrong: Callable[..., Callable[[], torch.Tensor]]
) -> list[Variant]:
    if scale is not None:  # an explicit scale: ignoring it, or reading 0.0 as "none given"
        mid = "scale-zero-as-default" if scale == 0 else "scale-argument-ignored"
        return [
            Variant(
                mid,
                f"attention with the default scale 1/sqrt(E) = {1 / math.sqrt(E):.4g} instead of the "
                f"scale={scale} passed",
                wrong(scale=None),
            )
        ]
    factors = {
        "no scale at all (1)": 1.0,
        f"1/E = 1/{E}": 1 / E,
        f"1/E**2 = 1/{E * E}": 1 / E**2,
        f"sqrt(E) = {math.sqrt(E):.4g} (multiplied)": math.sqrt(E),
    }
    return [
        Variant(
            "wrong-scale",
            f"attention with the scores scaled by {name} instead of 1/sqrt(E) = "
            f"{1 / math.sqrt(E):.4g}",
            wrong(scale=factor),
        )
        for name, factor in factors.items()
    ]


def _masks(
    keep: torch.Tensor | None,
    bias: torch.Tensor | None,
    wrong: Callable[..., Callable[[], torch.Tensor]],
    dtype: torch.dtype,
) -> list[Variant]:
    """``dtype``: the student's, where the variant must fail as theirs does (-1e9 does not fit in
    float16)."""
    items: list[Variant] = []
    if keep is not None:
        items += [
            Variant(
                "mask-inverted",
                "attention with the mask inverted (True read as 'blocked')",
                wrong(keep=~keep),
            ),
            Variant("mask-missing", "attention with the mask ignored", wrong(keep=None)),
            Variant(
                "mask-multiplied",
                "attention with the scores multiplied by the 0/1 mask (a blocked key's score "
                "becomes 0, which still gets weight)",
                wrong(fill=0.0, dead_rows_zero=False),
            ),
            Variant(
                "mask-broadcast",
                "attention with mask.squeeze(), broadcast against the wrong axes",
                wrong(keep=keep.squeeze()),
            ),
            Variant(
                "fully-masked-nan",
                "attention where a query with no visible key gets NaN (a softmax of a "
                "row of -inf) instead of zeros",
                wrong(dead_rows_zero=False),
            ),
            Variant(
                "mask-fill-finite",
                "attention with blocked scores set to -1e9 instead of -inf (a query with "
                "no key gets uniform weights)",
                wrong(fill=-1e9, dead_rows_zero=False, dtype=dtype),
            ),
        ]
    if bias is not None:
        items += [
            Variant(
                "additive-as-bool",
                "masked_fill(mask == 0, -inf): an additive mask read as a boolean "
                "keep-mask, which blocks the keys it allows and ignores its values",
                wrong(keep=bias != 0, bias=None),
            ),
            Variant(
                "bias-before-scale",
                "attention with the additive mask added before the scaling, so the "
                "bias is scaled too",
                wrong(bias_before_scale=True),
            ),
            Variant("mask-missing", "attention with the additive mask ignored", wrong(bias=None)),
        ]
    return items
