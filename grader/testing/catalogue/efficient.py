"""`efficient_attention`'s misconceptions that formulas show (shippable; the tiled ones are in
:mod:`grader.testing.catalogue.flash`): sdpa_attention's mask conventions, is_causal top-left when L
!= S, is_causal with a mask; flash_attention's scale, causal alignment and default."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from grader.testing.catalogue.scales import scale_detector
from grader.testing.diagnosis import Suspects, Variant
from grader.testing.variants import attention, causal_keep


def sdpa_suspects(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    mask: torch.Tensor | None = None,
    is_causal: bool = False,
) -> Suspects:
    """What ``sdpa_attention(q, k, v, mask, is_causal)`` gives with each misconception."""
    items: list[Variant] = []
    if mask is not None and mask.dtype == torch.bool:
        items += [
            Variant(
                "mask-inverted",
                "attention with ~mask: True read as 'blocked'",
                _att(q, k, v, keep=~mask),
            ),
            Variant("mask-missing", "attention with the mask never passed on", _att(q, k, v)),
            Variant(
                "mask-dtype",
                "attention with mask.float(): a 0/1 bias added to the scores, which masks nothing",
                _att(q, k, v, bias=mask.double()),
            ),
        ]
    elif isinstance(mask, torch.Tensor):  # an additive mask
        items += [
            Variant(
                "additive-as-bool",
                "masked_fill(mask == 0, -1e9): the additive mask read as a keep-mask, "
                "blocking the keys it allows",
                _att(q, k, v, keep=mask != 0, fill=-1e9, dead_rows_zero=False),
            ),
            Variant("mask-missing", "attention with the mask never passed on", _att(q, k, v)),
        ]
        if mask.dtype == q.dtype:
            items.append(
                Variant(
                    "causal-with-mask",
                    "F.scaled_dot_product_attention(..., attn_mask=mask, is_causal=True)",
                    lambda: F.scaled_dot_product_attention(q, k, v, mask, is_causal=True),
                )
            )
    return Suspects(tuple(items)) + formula_suspects(q, k, v, is_causal=is_causal)


def formula_suspects(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    is_causal: bool = False,
    causal_default: bool = False,
) -> Suspects:
    """The misconceptions of ``flash_attention`` or ``sdpa_attention`` that need no tiles to
    compute."""
    L, S, E = q.shape[-2], k.shape[-2], q.shape[-1]
    keep = causal_keep(L, S) if is_causal else None
    items = [
        Variant(
            "wrong-scale",
            f"attention with the scores scaled by 1/E = 1/{E} instead of 1/sqrt(E)",
            _att(q, k, v, keep=keep, scale=1 / E),
        ),
        Variant(
            "wrong-scale", "attention with no scaling at all", _att(q, k, v, keep=keep, scale=1.0)
        ),
        Variant(
            "softmax-no-max",
            "attention with exp(scores) not shifted by the running max, which overflows here",
            lambda: attention(q, k, v, keep=keep, naive=True, dtype=q.dtype)[0],
        ),
    ]
    if is_causal and S - L:  # fewer (or more) queries than keys: the alignment matters
        items.append(
            Variant(
                "mask-top-left",
                f"causal attention aligned top-left (query i sees keys 0..i) where "
                f"it is bottom-right (query i sits at position S - L + i = {S - L} + i): SDPA's own "
                "is_causal, alone or beside the bottom-right mask",
                _att(q, k, v, keep=causal_keep(L, S, align="top-left")),
                also=("causal-with-mask",),
            )
        )
    if is_causal and S - L:
        flipped = torch.ones(L, S, dtype=torch.bool).tril(diagonal=L - S)
        items += [
            Variant(
                "mask-top-left",
                f"causal attention with the mask's offset the wrong way: tril(diagonal=L - S = {L - S}) "
                f"where it is S - L = {S - L}{', rows with no key ' + dead if dead else ''}",
                _att(q, k, v, keep=flipped, dead_rows_zero=not dead),
            )
            # a query left with no key: zeros (SDPA) or NaN (a softmax of -inf); only L < S leaves
            # one
            for dead in ("", "NaN")[: 2 if bool((~flipped.any(-1)).any()) else 1]
        ]
    if keep is not None and bool((~keep.any(-1)).any()):  # L > S: the first queries see no key
        items.append(
            Variant(
                "fully-masked-nan",
                "attention whose queries with no key to see (before the first key) are NaN, a 0/0, "
                "instead of zeros",
                _att(q, k, v, keep=keep, dead_rows_zero=False),
            )
        )
    if keep is not None:
        items.append(Variant("mask-missing", "attention with no causal mask", _att(q, k, v)))
        items.append(
            Variant(
                "mask-dtype",
                "attention with the causal mask built as 1.0/0.0 floats: SDPA adds a float mask to the "
                "scores (+1 where a key is allowed), so it blocks nothing",
                _att(q, k, v, bias=keep.to(torch.float64)),
            )
        )
        items.append(
            Variant(
                "mask-diagonal",
                "causal attention whose mask also blocks each query's own key (j < i, the diagonal "
                "left out)",
                _att(q, k, v, keep=causal_keep(L, S, align="strict")),
            )
        )
    if q.dim() == 3:
        items.append(
            Variant(
                "dims-from-front",
                "code that counts dims from the front (shape[3], transpose(2, 3)): "
                "right for 4-D inputs only, and these are (..., L, E) with one leading dim",
                lambda: torch.empty(q.shape[3]),
            )
        )
    if causal_default:
        items.append(
            Variant(
                "default-causal",
                "causal attention: is_causal defaults to True in your signature, "
                "and the specification's default is False",
                _att(q, k, v, keep=causal_keep(L, S)),
            )
        )
    sizes = {"E": E, "Ev": v.shape[-1], "L": L, "S": S}
    work = q.numel() // E * S  # scores per run
    fitted = scale_detector(
        lambda c: _att(q, k, v, keep=keep, scale=c)(), 1 / math.sqrt(E), sizes, work
    )
    return Suspects((*items, fitted))


def _att(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **knobs: Any
) -> Callable[[], torch.Tensor]:
    return lambda: attention(q, k, v, **knobs)[0].to(q.dtype)
