"""RoPE's misconceptions: the tables with one step changed (the base ignored, the exponent's sign or
step wrong, positions from 1, (sin, cos) returned, the angles in float32) and the rotation with one
step changed (every pair turned by minus its angle, the other pairing, the positions ignored, (B, T)
rows not lined up with the batch, the rows reshaped to 4-D), and the Hugging Face table layout (each
column duplicated to head_dim) that the hidden suite prices apart from wrong values
(:func:`pairs_view`).

Plain formulas on plain tensors, float64 inside: nothing here is the exercise's solution written the
way it asks.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from grader.testing.catalogue.ropefit import frequency_detector
from grader.testing.diagnosis import Suspects, Variant

Tables = tuple[torch.Tensor, torch.Tensor]


def tables(
    head_dim: int,
    max_len: int,
    base: float = 10000.0,
    *,
    step: float = 2.0,
    sign: float = -1.0,
    first: int = 0,
    angle_dtype: torch.dtype = torch.float64,
) -> Tables:
    """(cos, sin) of m * theta_i, theta_i = base ** (sign * step * i / head_dim), m = first .. first
    + max_len - 1; every knob at its default is the right table (float64); ``angle_dtype``: the
    angles computed in that dtype."""
    i = torch.arange(head_dim // 2, dtype=angle_dtype)
    theta = base ** (sign * (step * i) / head_dim)
    angle = torch.arange(first, first + max_len, dtype=angle_dtype)[:, None] * theta[None, :]
    return angle.cos().double(), angle.sin().double()


def table_suspects(
    head_dim: int,
    max_len: int,
    base: float,
    which: int,
    dtype: torch.dtype,
    rows: slice = slice(None),
) -> Suspects:
    """What table ``which`` (0: cos, 1: sin) of ``rope_frequencies(head_dim, max_len, base, dtype)``
    is (its ``rows``: those the test compares) with each misconception."""

    def of(**knobs: object) -> Callable[[], torch.Tensor]:
        return lambda: tables(head_dim, max_len, base, **knobs)[which][rows].to(dtype)  # type: ignore[arg-type]

    items = [
        Variant(
            "rope-return-order",
            "the other table: (sin, cos) returned instead of (cos, sin)",
            lambda: tables(head_dim, max_len, base)[1 - which][rows].to(dtype),
        ),
        Variant(
            "rope-frequencies",
            "tables with theta_i = base ** (+2i / head_dim): the exponent's minus sign lost",
            of(sign=1.0),
        ),
        Variant(
            "rope-frequencies",
            "tables with theta_i = base ** (-i / head_dim): the exponent stepping by 1 "
            "over arange(head_dim) instead of by 2 over the pairs",
            of(step=1.0),
        ),
        Variant(
            "rope-positions-start-one",
            "tables of positions 1 .. max_len: row 0 must be position 0 (angle 0, cos 1, sin 0)",
            of(first=1),
        ),
        Variant(
            "precision-lowered",
            "tables whose angles m * theta_i are computed in float32 and cast",
            of(angle_dtype=torch.float32),
        ),
    ]
    if base != 10000.0:
        items.insert(
            1,
            Variant(
                "rope-base-ignored",
                f"tables built with base 10000 instead of the base given ({base:g})",
                lambda: tables(head_dim, max_len)[which][rows].to(dtype),
            ),
        )
    fitted = frequency_detector(head_dim, base, which, torch.arange(max_len)[rows])
    return Suspects((*items, fitted))  # any other theta_i: read off the table


def hf_layout(t: torch.Tensor) -> torch.Tensor:
    """A (max_len, head_dim // 2) table in Hugging Face's (max_len, head_dim) layout: cat(t, t)."""
    return torch.cat((t, t), dim=-1)


def pairs_view(got: object, head_dim: int) -> object:
    """``got`` seen one column per pair: a table in Hugging Face's layout (head_dim columns whose
    two halves are equal) is cut to its first half, so its values are judged apart from its layout;
    anything else is unchanged."""
    if type(got) is not torch.Tensor or got.dim() != 2 or got.shape[-1] != head_dim or head_dim % 2:
        return got
    half = head_dim // 2
    return got[:, :half] if bool(torch.equal(got[:, :half], got[:, half:])) else got


# -----------------------------------------------------------------------------------------------
# the rotation
def rotate(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    positions: torch.Tensor | None = None,
    *,
    pairing: str = "half",
    sign: float = 1.0,
    ignore_positions: bool = False,
    unsqueeze: bool = True,
    rows_4d: bool = False,
) -> torch.Tensor:
    """x rotated in float64 by the rows of (cos, sin) (one column per pair) and returned in x's
    dtype. ``pairing``: "half" (x[i], x[i + hd/2]), "interleaved" (x[2i], x[2i+1]) in place,
    "neighbours-cat" (the interleaved pairs rotated and concatenated) or "half-stack" (the
    half-split pairs put in place as interleaved ones are); ``sign`` -1: every pair turned by minus
    its angle; ``ignore_positions``: rows 0 .. T-1 whatever positions says; ``unsqueeze`` False: (B,
    T) rows not unsqueezed over the heads; ``rows_4d``: the rows reshaped to (1, 1, T, hd/2)."""
    T = x.shape[-2]
    use = None if ignore_positions else positions
    c, s = (cos[:T], sin[:T]) if use is None else (cos[use], sin[use])
    if use is not None and use.dim() == 2 and unsqueeze:
        c, s = c.unsqueeze(-3), s.unsqueeze(-3)
    if rows_4d:
        c, s = c[None, None], s[None, None]
    c, s, z = c.double(), sign * s.double(), x.double()
    if pairing in ("half", "half-stack"):
        x1, x2 = z[..., : z.shape[-1] // 2], z[..., z.shape[-1] // 2 :]
    else:
        x1, x2 = z[..., 0::2], z[..., 1::2]
    a, b = x1 * c - x2 * s, x1 * s + x2 * c
    out = (
        torch.stack((a, b), dim=-1).flatten(-2)
        if pairing in ("interleaved", "half-stack")
        else torch.cat((a, b), dim=-1)
    )
    return out.to(x.dtype)


def rotate_suspects(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    positions: torch.Tensor | None = None,
    *,
    interleaved: bool = False,
) -> Suspects:
    """What ``apply_rope`` (``apply_rope_interleaved``) of these inputs gives with each
    misconception; (cos, sin) one column per pair."""
    own = "interleaved" if interleaved else "half"

    def of(**knobs: object) -> Callable[[], torch.Tensor]:
        return lambda: rotate(x, cos, sin, positions, **{"pairing": own, **knobs})  # type: ignore[arg-type]

    other = (
        (
            ("half", "the half-split pairing (x[i], x[i + hd/2]) where the interleaved one is due"),
            (
                "half-stack",
                "the half-split pairs (x[i], x[i + hd/2]) rotated and put in place as interleaved pairs "
                "are: the pairs (x[2i], x[2i+1]) are due",
            ),
            (
                "neighbours-cat",
                "the neighbouring pairs (x[2i], x[2i+1]) rotated and concatenated instead of put back "
                "in place",
            ),
        )
        if interleaved
        else (
            (
                "interleaved",
                "the interleaved pairing (x[2i], x[2i+1]) put back in place where the half-split one "
                "(x[i], x[i + hd/2]) is due",
            ),
            (
                "neighbours-cat",
                "neighbouring features (x[2i], x[2i+1]) paired and the results concatenated: the "
                "interleaved pairing where the half-split one (x[i], x[i + hd/2]) is due",
            ),
        )
    )
    items = [
        Variant(
            "rope-rotation-sign",
            "every pair turned by minus its angle (rotate_half as cat(x2, -x1))",
            of(sign=-1.0),
        )
    ]
    items += [
        Variant("rope-pairing", f"the rotation with {says}", of(pairing=p)) for p, says in other
    ]
    if positions is not None:
        items.append(
            Variant(
                "positions-not-offset",
                "the rotation by rows 0 .. T-1 whatever the positions are",
                of(ignore_positions=True),
            )
        )
        if positions.dim() == 2:
            items.append(
                Variant(
                    "rope-positions-broadcast",
                    "the (B, T) positions' rows (B, T, hd/2) broadcast "
                    "against x without unsqueezing the heads axis",
                    of(unsqueeze=False),
                )
            )
    if x.dim() != 4:
        items.append(
            Variant(
                "rope-shape",
                "the rotation with the rows reshaped to (1, 1, T, hd/2), which adds "
                "leading dims to an input that is not 4-D",
                of(rows_4d=True),
            )
        )
    return Suspects(tuple(items))
