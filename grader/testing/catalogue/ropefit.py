"""Wrong RoPE frequencies, read off the table itself: whatever the student's theta_i are.

A RoPE table holds cos (or sin) of m * theta_i for position m (a row) and pair i (a column). A
student's table with wrong frequencies (the exponent's step, sign or precedence, the base) is still
such a table, with other theta_i. :func:`frequency_detector` recovers one theta per column from the
row of position 1, rebuilds the whole table from them, and names ``rope-frequencies`` only when the
rebuilt table is the student's: the message gives the frequencies found beside the right ones, and
their law when it is a power of the base.
"""

from __future__ import annotations

import math

import torch

from grader.testing.diagnosis import Detector, Observation, close


def frequency_detector(head_dim: int, base: float, which: int, positions: torch.Tensor) -> Detector:
    """For table ``which`` (0: cos, 1: sin) whose compared rows are ``positions`` (the test's row
    slice)."""

    def observe(got: torch.Tensor, expected: torch.Tensor) -> Observation:
        found = _recovered(got, which, positions)
        if found is None:
            return None
        theta, rebuilt = found
        if not close(rebuilt, got, 0.0, 0.0) or close(rebuilt, expected, 0.0, 0.0):
            return None
        right = base ** (-2 * torch.arange(head_dim // 2, dtype=torch.float64) / head_dim)
        return "rope-frequencies", (
            f"your table is {'cos' if which == 0 else 'sin'}(m * theta_i) with theta = {_few(theta)}, "
            f"where theta_i = base ** (-2i / head_dim) = {_few(right)}"
            f"{_law(theta, head_dim, base, _measurable(theta, which, positions))}"
        )

    return Detector("rope-frequencies", observe)


def _recovered(
    got: torch.Tensor, which: int, positions: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(theta per column, the table rebuilt from them), or None without a row for position 1."""
    if got.dim() != 2 or not got.is_floating_point() or got.shape[0] != positions.numel():
        return None
    if not bool((positions == 1).any()):
        return None
    table = got.detach().to(torch.float64)
    at = {int(p): r for r, p in enumerate(positions.tolist())}
    theta = _angles(table[at[1]], which).min(dim=0).values.abs()  # position 1: the angle itself
    m = 2
    while (
        m in at
    ):  # unwrap m * theta at m = 2, 4, 8, ...: each doubles the digits a float32 row 1 gives
        candidates = _angles(table[at[m]], which)
        turns = ((m * theta - candidates) / (2 * math.pi)).round()
        unwrapped = candidates + 2 * math.pi * turns
        theta = unwrapped.gather(0, (unwrapped - m * theta).abs().argmin(dim=0)[None])[0] / m
        m *= 2
    angle = positions.to(torch.float64)[:, None] * theta
    return theta, (angle.cos() if which == 0 else angle.sin()).to(got.dtype)


def _angles(row: torch.Tensor, which: int) -> torch.Tensor:
    """(2, columns): the two angles in one turn whose cos (``which`` 0) or sin (1) is ``row``."""
    first = row.clamp(-1.0, 1.0)
    first = first.acos() if which == 0 else first.asin()
    return torch.stack([first, -first if which == 0 else math.pi - first])


def _few(theta: torch.Tensor) -> str:
    shown = ", ".join(f"{float(t):.4g}" for t in theta[:4])
    return f"[{shown}{', ...' if theta.numel() > 4 else ''}]"


def _measurable(theta: torch.Tensor, which: int, positions: torch.Tensor) -> torch.Tensor:
    """Columns whose theta a float32 table tells: a cos that never leaves 1 hides how small its
    angle is."""
    if which == 1:
        return theta > 0
    return theta * float(positions.max()) > 0.05


def _law(theta: torch.Tensor, head_dim: int, base: float, seen: torch.Tensor) -> str:
    """ ", i.e. base ** (k * i / head_dim)" when the measurable theta follow one (only told, never
    required)."""
    i = torch.arange(theta.numel(), dtype=torch.float64)[seen]
    if i.numel() < 3 or float(i[0]) != 0 or not bool((theta[seen] > 0).all()) or base <= 1:
        return ""
    logs = theta[seen].log() / math.log(base)  # = k * i / head_dim for some k when a power law
    k = float((logs[1:] / i[1:]).mean()) * head_dim
    if abs(float(logs[0])) > 1e-3 or not torch.allclose(logs, k * i / head_dim, atol=1e-3):
        return ""
    return f": yours are base ** ({k:.3g} * i / head_dim)"
