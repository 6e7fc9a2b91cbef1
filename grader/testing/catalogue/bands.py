"""What a wrong boolean attention mask is, read from the mask itself: causal and sliding-window
masks are bands.

A causal or sliding-window keep-mask of shape (L, S) keeps, for query i, the keys j with ``lo <= j -
i <= hi``: it is constant along each diagonal, and its kept diagonals are one run. A student's wrong
mask is very often a band too, only another one: the diagonal left out, the band turned to the
future, a window one key too wide, the whole band shifted by S - L (aligned top-left).
:func:`band_detector` reads both bands off the two masks and names the relation, whatever code made
the student's: no list of wrong masks to foresee. A mask that is no band is left to the check's
other suspects.
"""

from __future__ import annotations

import torch

from grader.testing.diagnosis import Detector, Observation

Band = tuple[int, int]  # (lo, hi): keys j with lo <= j - i <= hi are kept


def band_of(mask: torch.Tensor) -> Band | None:
    """The band a 2-D boolean mask keeps, or None (not constant along its diagonals, kept diagonals
    not one run, nothing kept); leading dims of size 1 are ignored."""
    while mask.dim() > 2 and mask.shape[0] == 1:
        mask = mask[0]
    if mask.dim() != 2 or mask.dtype != torch.bool or 0 in mask.shape:
        return None
    L, S = mask.shape
    diagonal = (
        torch.arange(S)[None, :] - torch.arange(L)[:, None] + (L - 1)
    ).flatten()  # j - i, from 0
    total = torch.bincount(diagonal, minlength=L + S - 1)
    true = torch.bincount(diagonal, weights=mask.flatten().double(), minlength=L + S - 1)
    if not bool(((true == 0) | (true == total)).all()):
        return None  # some diagonal is partly kept: no band
    kept = [int(d) - (L - 1) for d in (true > 0).nonzero().flatten()]
    if not kept or kept != list(range(kept[0], kept[-1] + 1)):
        return None
    return kept[0], kept[-1]


def _relation(got: Band, right: Band, L: int, S: int) -> tuple[str, str] | None:
    """(misconception ids, what the student's band is) for two bands of an (L, S) mask."""
    (lo, hi), (lo0, hi0) = got, right
    first, last = -(L - 1), S - 1
    causal = lo0 == first
    if (lo, hi) == (first, last):
        return "mask-missing", "every key of every query kept: no mask at all"
    if hi == hi0 - 1 and lo in (lo0, lo0 - 1, first):
        return "mask-diagonal", "each query's own key blocked too (the diagonal left out)"
    if S != L and (lo, hi) == (max(lo0 - (S - L), first), hi0 - (S - L)):
        return "mask-top-left", f"the band aligned top-left: shifted {S - L} keys into the past"
    if hi == last and lo in (hi0, hi0 + 1):
        return "mask-inverted", "the future kept and the past blocked (the band turned around)"
    if (lo, hi) == (-hi0, -lo0):
        return "mask-inverted", "the band mirrored: future keys kept instead of past ones"
    if not causal and hi == hi0 and abs(lo - lo0) == 1:
        return "window-off-by-one", f"a window of {hi - lo + 1} keys where it is {hi0 - lo0 + 1}"
    if not causal and lo == lo0 and hi > hi0 and hi - hi0 <= hi0 - lo0 + 1:
        return "window-symmetric", "future keys inside the window kept too"
    if not causal and (lo, hi) == (first, hi0):
        return "mask-missing", "every past key kept: the window's lower edge missing"
    return None


def _describe(band: Band) -> str:
    lo, hi = band
    return f"{lo} <= j - i <= {hi}"


def band_detector() -> Detector:
    """A detector for a wrong keep-mask (True = may attend) that is a band of another shape than the
    right one.

    It names one misconception only when both masks are bands and their relation is one a student
    makes; the message gives both bands in numbers, so it stays true when the reading is a near
    miss."""

    def observe(got: torch.Tensor, expected: torch.Tensor) -> Observation:
        if got.shape != expected.shape:
            return None
        mine, right = band_of(got), band_of(expected)
        if mine is None or right is None or mine == right:
            return None
        L, S = got.shape[-2:]
        found = _relation(mine, right, L, S)
        if found is None:
            return None
        mid, what = found
        return mid, (
            f"your mask keeps key j for query i when {_describe(mine)}, the right one when "
            f"{_describe(right)}: {what}"
        )

    return Detector("band", observe)
