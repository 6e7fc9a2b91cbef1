"""How a wrong tensor is shown: how many elements differ and by how much, then where the first
mismatch is, with the values around it on both sides (a grid for boolean masks). The
"got …, expected …" half of every value check's message (:mod:`grader.testing.checks` decides when
to say it); plain formatting on plain tensors.
"""

from __future__ import annotations

import torch


def mismatch_summary(
    got: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float
) -> str | None:
    """``None`` when ``got`` is close to ``expected`` (``|g - e| <= atol + rtol |e|``, NaN never
    close; booleans equal), else how many elements differ and by how much at most.

    Not ``torch.testing.assert_close``: its first call imports torch's distributed tensors (0.5-0.7
    s, in every grading process). A sandboxed reply always arrives on CPU: values are compared where
    they are."""
    g, e = got.detach().cpu(), expected.detach().cpu()
    if g.dtype == torch.bool and e.dtype == torch.bool:
        bad = g != e
    else:
        g, e = g.to(torch.float64), e.to(torch.float64)
        bad = ~torch.isclose(g, e, rtol=rtol, atol=atol)
    count = int(bad.sum())
    if not count:
        return None
    # only the mismatched elements count (an inf equal to an inf is close, yet inf - inf is NaN)
    inf = float("inf")
    diff = torch.where(
        bad, (g.to(torch.float64) - e.to(torch.float64)).abs().nan_to_num(inf, posinf=inf), 0.0
    )
    worst = tuple(int(i) for i in torch.nonzero(diff == diff.max())[0]) if diff.dim() else ()
    relative = float(
        torch.where(bad, diff / e.to(torch.float64).abs(), 0.0).nan_to_num(inf, posinf=inf).max()
    )
    return (
        f"Mismatched elements: {count} / {bad.numel()} ({100 * count / bad.numel():.1f}%) "
        f"Greatest absolute difference: {float(diff.max()):.6g} at index {worst} (up to {atol:g} allowed) "
        f"Greatest relative difference: {relative:.6g} (up to {rtol:g} allowed)"
    )


def mismatch_preview(got: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> str:
    """Where the first mismatch is and the values around it (a grid for boolean masks), both
    sides."""
    g, e = got.detach().cpu(), expected.detach().cpu()
    if g.dtype == torch.bool or e.dtype == torch.bool:
        bad = g.bool() != e.bool()
    else:
        g64, e64 = g.to(torch.float64), e.to(torch.float64)
        bad = ~torch.isclose(g64, e64, rtol=rtol, atol=atol, equal_nan=True)
    if g.dim() == 0 or not bool(bad.any()):
        return f"  got      {_row(g.reshape(-1), 0)}\n  expected {_row(e.reshape(-1), 0)}"
    index = tuple(int(i) for i in torch.nonzero(bad)[0])
    digits = _digits(g[index].item(), e[index].item())
    head = (
        f"  first mismatch at index {index}: got {_fmt(g[index].item(), digits)}, "
        f"expected {_fmt(e[index].item(), digits)}"
    )
    if g.dtype == torch.bool and e.dtype == torch.bool and g.dim() >= 2:
        return head + "\n" + _grids(g, e, index)
    line = index[:-1]
    where = f"[{', '.join(map(str, line))}, …]" if line else "all"
    return (
        f"{head}\n  got      {where}: {_row(g[line], index[-1], digits)}\n"
        f"  expected {where}: {_row(e[line], index[-1], digits)}"
    )


def _row(values: torch.Tensor, at: int, digits: int = 4, before: int = 2, after: int = 4) -> str:
    """``[…, a, b, <c>, d, …]``: a window of a 1-D tensor around position ``at`` (marked with
    <>)."""
    lo, hi = max(0, at - before), min(values.numel(), at + after + 1)
    cells = [
        f"<{_fmt(values[i].item(), digits)}>" if i == at else _fmt(values[i].item(), digits)
        for i in range(lo, hi)
    ]
    return (
        "["
        + ("…, " if lo > 0 else "")
        + ", ".join(cells)
        + (", …" if hi < values.numel() else "")
        + "]"
    )


def _grids(
    got: torch.Tensor, expected: torch.Tensor, index: tuple[int, ...], size: int = 10
) -> str:
    """Both masks' (rows, columns) slice holding the first mismatch, 1 = True, as side-by-side
    grids."""
    r, c = index[-2], index[-1]
    rows = range(max(0, r - size // 2), min(got.shape[-2], max(0, r - size // 2) + size))
    cols = range(max(0, c - size // 2), min(got.shape[-1], max(0, c - size // 2) + size))
    sub = index[:-2]
    title = f"  mask{list(sub) if sub else ''} rows {rows.start}..{rows.stop - 1}, columns {cols.start}..{cols.stop - 1}"
    lines = [title + "  (got | expected, 1 = True)"]
    for i in range(rows.start, rows.stop):
        left = "".join("1" if got[sub + (i, j)] else "0" for j in cols)
        right = "".join("1" if expected[sub + (i, j)] else "0" for j in cols)
        lines.append(f"    {left} | {right}{'   <- first mismatch' if i == r else ''}")
    return "\n".join(lines)


def _digits(a: object, b: object) -> int:
    """Significant digits enough to tell ``a`` from ``b`` (4 at least): equal-looking previews say
    nothing."""
    if not (isinstance(a, float) and isinstance(b, float)):
        return 4
    return next((n for n in range(4, 18) if f"{a:.{n}g}" != f"{b:.{n}g}"), 17)


def _fmt(v: object, digits: int = 4) -> str:
    return f"{v:.{digits}g}" if isinstance(v, float) else str(v)
