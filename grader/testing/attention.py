"""Oracles shared by the public and hidden suites: PyTorch's own attention with the student's
weights.

``nn.MultiheadAttention`` and SDPA's math backend are independent of every exercise's code, so they
are the oracles of choice wherever the exercise's module has the same weights (W_query, W_key,
W_value, out_proj). Shipped to students with the public tests: nothing here is an exercise's
solution.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from grader.testing.catalogue.structure import diagnose_structure
from grader.testing.checks import fail

__all__ = [
    "PROJECTIONS",
    "causal_oracle",
    "expect_params",
    "mha_oracle",
    "sdpa_float64",
    "sdpa_fused",
    "sdpa_math",
]

PROJECTIONS = ("W_query", "W_key", "W_value")


def sdpa_math(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kwargs: object) -> torch.Tensor:
    """``F.scaled_dot_product_attention`` on its math backend (the plain formula, in the inputs'
    dtype)."""
    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(q, k, v, **kwargs)  # type: ignore[arg-type]


def sdpa_fused(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kwargs: object) -> torch.Tensor:
    """``F.scaled_dot_product_attention`` on the kernel PyTorch picks (its fused flash kernel on the
    CPU, the math backend where the inputs need it): the oracle of the memory tests' large inputs.
    The math backend builds the L x S matrix: at L = S = 4096 a forward and backward take 0.26 s
    there and 0.035 s here, and the two agree to about 1e-6 (float32 tolerances are 1e-5 and 1e-4).
    Small inputs keep :func:`sdpa_math` and float64."""
    return F.scaled_dot_product_attention(q, k, v, **kwargs)  # type: ignore[arg-type]


def sdpa_float64(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    scale: float | None = None,
) -> torch.Tensor:
    """:func:`sdpa_math` computed in float64 (a bool ``mask`` as it is, an additive one in float64),
    cast back to ``q``'s dtype: the oracle for low-precision inputs."""
    m = mask if mask is None or mask.dtype == torch.bool else mask.double()
    return sdpa_math(q.double(), k.double(), v.double(), attn_mask=m, scale=scale).to(q.dtype)


def causal_oracle(x: torch.Tensor, p: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """One causal attention head by SDPA's math backend, on the projections (``W_query``... with
    optional biases) that the parameters ``p`` define: (B, T, d_in) -> (B, T, d_out)."""
    q, k, v = (F.linear(x, p[f"{n}.weight"], p.get(f"{n}.bias")) for n in PROJECTIONS)
    return sdpa_math(q, k, v, is_causal=True)


def mha_oracle(
    p: Mapping[str, torch.Tensor],
    num_heads: int,
    x: torch.Tensor,
    context: torch.Tensor | None = None,
    *,
    keep: torch.Tensor | None = None,
    causal: bool = False,
) -> torch.Tensor:
    """``nn.MultiheadAttention`` holding the weights ``p`` (a missing projection bias counts as
    zero), in x's dtype: self-attention when ``context`` is None, else cross-attention over it.
    ``keep`` (B, S) is True for real keys; ``causal`` blocks the future. (Its own masks mean
    BLOCKED, hence the inversions.)"""
    d = p["W_query.weight"].shape[0]
    mha = nn.MultiheadAttention(d, num_heads, batch_first=True, bias=True).to(x.dtype)
    zeros = torch.zeros(d, dtype=x.dtype)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([p[f"{n}.weight"] for n in PROJECTIONS]))
        mha.in_proj_bias.copy_(torch.cat([p.get(f"{n}.bias", zeros) for n in PROJECTIONS]))
        mha.out_proj.weight.copy_(p["out_proj.weight"])
        mha.out_proj.bias.copy_(p.get("out_proj.bias", zeros))
    mha.eval()
    kv = x if context is None else context
    out: torch.Tensor  # nn.Module.__call__ is typed Any
    with torch.no_grad():
        out, _ = mha(
            x,
            kv,
            kv,
            attn_mask=_blocked(x.shape[1], kv.shape[1], num_heads, keep, causal),
            need_weights=False,
        )
    return out


def _blocked(
    T: int, S: int, num_heads: int, keep: torch.Tensor | None, causal: bool
) -> torch.Tensor | None:
    """MultiheadAttention's attn_mask (True = blocked): the future when ``causal``, padded keys when
    ``keep`` is given, then as (B * num_heads, T, S). Padding goes here rather than in
    key_padding_mask, whose check imports torch's symbolic shapes and sympy: 0.4 s of the first
    grade in every grading process."""
    blocked = torch.triu(torch.ones(T, S, dtype=torch.bool), diagonal=1) if causal else None
    if keep is None:
        return blocked
    padded = (~keep)[:, None, None, :]  # (B, 1, 1, S)
    full = padded if blocked is None else padded | blocked  # (B, 1, T, S) or (B, 1, 1, S)
    return full.expand(-1, num_heads, T, -1).reshape(-1, T, S)  # (B * num_heads, T, S)


def expect_params(
    params: Mapping[str, torch.Tensor],
    names: Iterable[str],
    hint: str,
    what: str = "named_parameters()",
) -> dict[str, torch.Tensor]:
    """A student module's own parameters, after checking that the ``names`` an oracle needs are
    there."""
    __tracebackhide__ = True
    missing = [n for n in names if n not in params]
    if missing:
        shapes = {n: tuple(t.shape) for n, t in params.items()}
        said = diagnose_structure(shapes, {**shapes, **{n: () for n in missing}})  # by name only
        fail(
            f"{what}: got {sorted(params)[:8]}, expected to find {missing[:6]}"
            + (f"\n  {said}" if said else ""),
            None if said else hint,
        )
    return dict(params)
