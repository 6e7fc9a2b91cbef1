"""Inputs the wire cannot carry, asked for by name: a tensor the worker passes as a transposed or
sliced view, or one tensor object passed as several arguments
(:class:`grader.protocol.values.View`).

Each helper returns an instruction whose result, inside the sandbox, equals ``t`` in values and
shape: only its layout (strides, storage shared with other arguments) differs, so a test compares it
with the same oracle.
"""

from __future__ import annotations

import torch

from grader.protocol.values import View


def transposed(t: torch.Tensor, dim0: int = -2, dim1: int = -1) -> View:
    """``t`` as the transpose of a contiguous tensor: non-contiguous, as ``x.view(B, L, H,
    E).transpose(1, 2)`` hands a (B, H, L, E) query to attention."""
    n = t.dim()
    order = list(range(n))
    order[dim0 % n], order[dim1 % n] = order[dim1 % n], order[dim0 % n]
    return View(t.permute(order).contiguous(), permute=tuple(order))


def sliced(t: torch.Tensor, extra: int = 3) -> View:
    """``t`` as the first columns of a wider tensor (its last dim ``extra`` wider, filled with large
    values that any read past the slice would show): rows are not adjacent in memory."""
    wide = torch.cat([t, torch.full((*t.shape[:-1], extra), 1e4, dtype=t.dtype)], dim=-1)
    return View(wide, narrow=(t.dim() - 1, 0, t.shape[-1]))


def shared(t: torch.Tensor, key: int = 0) -> View:
    """``t``; every ``shared(..., key)`` of one call is the same tensor object inside the
    sandbox."""
    return View(t, share=key)
