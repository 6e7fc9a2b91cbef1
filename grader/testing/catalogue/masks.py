"""`masks`' misconceptions: the blocked set used as the keep-mask, a float or additive mask where a
boolean one is due, a padding mask inverted, off by one or compared without the broadcast dims, an
additive mask inverted or filled with -1e9."""

from __future__ import annotations

import torch

from grader.testing.catalogue.bands import band_detector
from grader.testing.diagnosis import Detector, Suspects, Variant, tag


def causal_suspects(T: int) -> Suspects:
    keep = torch.ones(T, T, dtype=torch.bool).tril()
    return Suspects(
        (
            Variant(
                "mask-inverted",
                "torch.triu(ones, diagonal=1): the BLOCKED set, used as the keep-mask",
                lambda: ~keep,
            ),
            # any other band: the diagonal left out, the band turned, no mask at all
            band_detector(),
        )
    )


def padding_suspects(lengths: torch.Tensor, max_len: int) -> Suspects:
    pos = torch.arange(max_len)
    return Suspects(
        (
            Variant(
                "mask-inverted",
                "positions >= lengths: True on the padding (nn.MultiheadAttention's "
                "key_padding_mask convention)",
                lambda: pos[None, :] >= lengths[:, None],
            ),
            Variant(
                "padding-off-by-one",
                "positions <= lengths: one padding token kept per sequence",
                lambda: pos[None, :] <= lengths[:, None],
            ),
            Variant(
                "padding-off-by-one",
                "positions < lengths - 1: each sequence's last real token dropped",
                lambda: pos[None, :] < lengths[:, None] - 1,
            ),
            Variant(
                "mask-broadcast",
                "torch.arange(max_len) < lengths, without the broadcast dims",
                lambda: pos < lengths,
            ),
        )
    )


def additive_suspects(mask: torch.Tensor, dtype: torch.dtype = torch.float32) -> Suspects:
    zeros = torch.zeros(mask.shape, dtype=dtype)
    return Suspects(
        (
            Variant(
                "mask-inverted",
                "-inf where the mask is True (may attend) and 0 where it is False",
                lambda: zeros.masked_fill(mask, float("-inf")),
            ),
            Variant(
                "mask-fill-finite",
                "-1e9 instead of -inf where the mask is False",
                lambda: zeros.masked_fill(~mask, -1e9),
            ),
            Variant(
                "mask-multiplied",
                "(~mask).to(dtype) * -inf: 0 * -inf is NaN, so the allowed places are NaN, not 0",
                lambda: (~mask).to(dtype) * float("-inf"),
            ),
            Variant(
                "mask-multiplied",
                "mask.to(dtype) * -inf: -inf where the mask is True and NaN where it is False",
                lambda: mask.to(dtype) * float("-inf"),
            ),
        )
    )


def bool_mask_kind(got: torch.Tensor) -> str | None:
    """The diagnosis of a mask of the wrong dtype: a float 0/1 mask, or an additive 0/-inf one,
    where a boolean keep-mask is due."""
    if got.dtype == torch.bool or not got.is_floating_point():
        return None
    values = set(torch.unique(got.detach().cpu()).tolist())
    if values <= {0.0, 1.0}:
        return tag(
            "mask-dtype",
            "a 0/1 float mask: SDPA reads a float mask as a bias to ADD (+1 or 0), so it blocks "
            "nothing; a boolean mask (True = may attend) is due",
        )
    if values <= {0.0, float("-inf")}:
        return tag(
            "mask-dtype", "an additive 0/-inf mask where a boolean one (True = may attend) is due"
        )
    return None


FINITE_FILL = Suspects(
    (
        Detector(
            "mask-fill-finite",
            lambda got, expected: (
                "a finite fill (such as -1e9) where -inf is due"
                if bool((torch.isinf(expected) & torch.isfinite(got) & (got < -1e3)).any())
                else None
            ),
        ),
    )
)
