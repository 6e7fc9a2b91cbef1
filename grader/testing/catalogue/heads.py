"""Attention modules by formula with knobs: projections, heads, mask, scale, softmax, output
projection.

One float64 computation covers the first assignment's modules and grouped-query attention: queries
from ``x``, keys and values from ``context`` (self-attention: ``x``), split into heads, scaled,
masked (causal bottom-right, a padding keep-mask, an additive bias), softmaxed, merged, projected.
Each knob is one misconception's change (:func:`module_variants`); every knob at its default is the
right answer. Parameters are the module's own, ``nn.Linear`` layout (``W_query.weight`` ...), a
missing bias counting as zero.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.nn.functional as F

from grader.inside.standins import stand_in_apply_rope, stand_in_rope_frequencies
from grader.testing.catalogue.knobs import KNOBS
from grader.testing.catalogue.scales import scale_detector
from grader.testing.diagnosis import Detector, Suspects, Variant
from grader.testing.variants import causal_keep, softmax

Params = Mapping[str, torch.Tensor]


@dataclass(frozen=True)
class Spec:
    """How the right module computes; the knobs a misconception turns are the fields after
    ``out_proj``."""

    heads: int = 1
    kv_heads: int | None = None  # grouped-query attention: fewer key/value heads
    causal: bool = False
    out_proj: bool = True
    scale: float | None = None  # None: 1/sqrt(head_dim)
    # the knobs
    weights: str = "W_query,W_key,W_value"  # the weights of q, k, v: a copy-paste slip swaps one
    kv_from_x: str = ""  # "kv", "k" or "v": projected from x instead of the context
    roles_swapped: bool = False  # queries from the context, keys and values from x
    use_bias: bool = True
    # "view": view(B, H, T, hd) without the transpose; "strided": (B, T, hd, H); for split_on only
    split: str = "transpose"
    split_on: str = "qkv"
    # "view": no transpose back; "1,3,2" ...: permute(0, 1, 3, 2) before the reshape
    merge: str = "transpose"
    scale_on: str = "scores"  # or "weights": the weights multiplied by the scale after the softmax
    # causal alignment: "top-left", "inverted", "strict", "none" (no causal mask)
    align: str = "bottom-right"
    mask_after_softmax: bool = False
    causal_fill: float = float("-inf")  # what a causally blocked score becomes
    softmax_dim: int = -1
    naive: bool = False
    keep_inverted: bool = False
    # a (B, S) padding mask as (B, 1, S) ("heads"), (B, 1, S, 1) ("queries"), (B, S, 1, 1)
    keep_align: str = "batch"
    # what padded scores become: 0.0 for scores multiplied by the 0/1 mask
    keep_fill: float = float("-inf")
    kv_len_from_query: bool = False  # keys and values split into heads with the queries' length
    # (max_len, base): the grader's stand-in RoPE turns q and k
    rope: tuple[int, float] | None = None
    rope_on: str = "qk"  # or "q" (keys left alone), "qkv" (the values turned too)
    # the padding keep-mask: "added" (scores + keep as 0/1 floats), "zeroed-kv" (k, v * keep)
    keep_as: str = "bool"
    # or "interleaved": the exercise's apply_rope_interleaved on the same tables
    rope_pairing: str = "half"
    rope_before_split: bool = False  # RoPE on (B, T, H, hd): the heads axis taken for the positions
    kv_pairing: str = "interleave"  # or "repeat": query head h reads kv head h % kv_heads
    skip_out_proj: bool = False
    # or "scores-times" (s * exp(bias)), "weights-times" (w * exp(bias)), "weights" (w + bias)
    bias_on: str = "scores"


def forward(
    x: torch.Tensor,
    p: Params,
    spec: Spec,
    *,
    context: torch.Tensor | None = None,
    keep: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """The module's output for ``x`` (B, T, d) under ``spec``, in x's dtype (float64 inside; float32
    for ``naive``, whose overflow must happen where the student's does). ``keep``: (B, S) True for
    real keys; ``bias``: broadcastable to (B, H, T, S), added after the scaling. A 2-D ``x`` (T, d)
    is one unbatched sequence."""
    if x.dim() == 2:
        return forward(
            x[None],
            p,
            spec,
            context=None if context is None else context[None],
            keep=keep,
            bias=bias,
        )[0]
    dtype = x.dtype if spec.naive else torch.float64
    if spec.roles_swapped and context is not None:
        x, context = context, x
    wq, wk, wv = spec.weights.split(",")
    q = _linear(x, p, wq, spec.use_bias, dtype)
    k, v = (
        _linear(
            x if context is None or n in spec.kv_from_x else context, p, w, spec.use_bias, dtype
        )
        for n, w in (("k", wk), ("v", wv))
    )
    Hkv = spec.kv_heads or spec.heads
    kv_len = x.shape[1] if spec.kv_len_from_query else None
    if spec.rope is not None and spec.rope_before_split:
        q, k = _rope_on_tokens(q, spec.heads, spec), _rope_on_tokens(k, Hkv, spec)
    how = {n: spec.split if n in spec.split_on else "transpose" for n in "qkv"}
    q, k, v = (
        _split(q, spec.heads, how["q"]),
        _split(k, Hkv, how["k"], kv_len),
        _split(v, Hkv, how["v"], kv_len),
    )
    if spec.rope is not None and not spec.rope_before_split:
        q, k, v = _rope(q, spec, "q"), _rope(k, spec, "k"), _rope(v, spec, "v")
    if Hkv != spec.heads:
        owner = (
            torch.arange(spec.heads) // (spec.heads // Hkv)
            if spec.kv_pairing == "interleave"
            else torch.arange(spec.heads) % Hkv
        )
        k, v = k[:, owner], v[:, owner]
    k, v, keep, added = _padding_misread(k, v, keep, spec.keep_as)
    factor = 1 / math.sqrt(q.shape[-1]) if spec.scale is None else spec.scale
    s = q @ k.transpose(-2, -1) * (factor if spec.scale_on == "scores" else 1.0) + added
    if bias is not None and spec.bias_on.startswith("scores"):
        s = s * bias.to(dtype).exp() if spec.bias_on == "scores-times" else s + bias.to(dtype)
    block = _blocked(spec, s.shape[-2], s.shape[-1], keep)
    if block is not None and not spec.mask_after_softmax:
        fill = spec.causal_fill if keep is None or spec.causal else spec.keep_fill
        s = s.masked_fill(block, fill)
    w = softmax(s, spec.softmax_dim, naive=spec.naive) * (
        factor if spec.scale_on == "weights" else 1.0
    )
    if block is not None and spec.mask_after_softmax:
        w = w.masked_fill(block, 0.0)
    if bias is not None and spec.bias_on.startswith(
        "weights"
    ):  # the decay after the softmax: rows unnormalised
        w = w * bias.to(dtype).exp() if spec.bias_on == "weights-times" else w + bias.to(dtype)
    o = w @ v  # (B, H, T, hd)
    o = merge_heads(o, spec.merge)
    if spec.out_proj and not spec.skip_out_proj:
        o = _linear(o, p, "out_proj", True, dtype)
    return o.to(x.dtype)


def merge_heads(o: torch.Tensor, how: str) -> torch.Tensor:
    """(B, H, T, hd) back to (B, T, H * hd): transposed, as is ("view"), or permuted ("1,3,2": dims
    1, 3, 2). The one spelling of a merge: KV decoding's knob (:mod:`.kv`) reads it too."""
    B, T = o.shape[0], o.shape[2]
    dims = {"transpose": "2,1,3", "view": "1,2,3"}.get(how, how)  # the two names for permutations
    return o.permute(0, *map(int, dims.split(","))).reshape(B, T, -1)


def _linear(
    x: torch.Tensor, p: Params, name: str, use_bias: bool, dtype: torch.dtype
) -> torch.Tensor:
    b = p.get(f"{name}.bias") if use_bias else None
    return F.linear(x.to(dtype), p[f"{name}.weight"].to(dtype), None if b is None else b.to(dtype))


def _split(t: torch.Tensor, heads: int, how: str, length: int | None = None) -> torch.Tensor:
    B, T, d = t.shape
    T = T if length is None else length  # a wrong length raises, as the student's view does
    if how == "view":
        return t.reshape(B, heads, T, d // heads)
    if how == "strided":
        return t.reshape(B, T, d // heads, heads).permute(0, 3, 1, 2)
    return t.reshape(B, T, heads, d // heads).transpose(1, 2)


def _tables(spec: Spec, head_dim: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    assert spec.rope is not None
    return tuple(t.to(dtype) for t in stand_in_rope_frequencies(head_dim, *spec.rope))  # type: ignore[return-value]


def _rope(t: torch.Tensor, spec: Spec, which: str) -> torch.Tensor:
    """The stand-in RoPE on (B, H, T, hd) when ``spec.rope_on`` names ``which`` of q, k, v."""
    if which not in spec.rope_on:
        return t
    first, second = _tables(spec, t.shape[-1], t.dtype)
    if spec.rope_pairing == "half":
        return stand_in_apply_rope(t, first, second)
    c, s = (
        first[: t.shape[-2]],
        second[: t.shape[-2]],
    )  # pair i is (x[2i], x[2i + 1]): rotated in place
    x1, x2 = t[..., 0::2], t[..., 1::2]
    return torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2)


def _rope_on_tokens(t: torch.Tensor, heads: int, spec: Spec) -> torch.Tensor:
    """RoPE on (B, T, H, hd) before the transpose: rotated by the head index, not the position."""
    B, T, d = t.shape
    split = t.reshape(B, T, heads, d // heads)
    return stand_in_apply_rope(split, *_tables(spec, d // heads, t.dtype)).reshape(B, T, d)


def _padding_misread(
    k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor | None, how: str
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | float]:
    """The (B, S) keep-mask used otherwise than to block: added to the scores as 0/1 floats, or
    multiplied into the keys and values; returns (k, v, the keep-mask left to block with, what is
    added to the scores)."""
    if keep is None or how == "bool":
        return k, v, keep, 0.0
    if how == "added":
        return k, v, None, keep[:, None, None, :].to(k.dtype)
    m = keep[:, None, :, None].to(
        k.dtype
    )  # (B, 1, S, 1): the padded tokens' keys and values zeroed
    return k * m, v * m, None, 0.0


def _blocked(spec: Spec, L: int, S: int, keep: torch.Tensor | None) -> torch.Tensor | None:
    """(B or 1, 1, L, S) True where a score is blocked, or None."""
    block = None
    if spec.causal and spec.align != "none":
        block = ~causal_keep(L, S, align=spec.align)[None, None]
    if keep is not None:
        padded = keep if spec.keep_inverted else ~keep
        padded = {
            "batch": lambda m: m[:, None, None, :],
            "heads": lambda m: m[:, None, :],
            "queries": lambda m: m[:, None, :, None],
            "heads-axis": lambda m: m[:, :, None, None],
        }[spec.keep_align](padded)
        block = padded if block is None else block | padded
    return block


def module_variants(
    spec: Spec,
    groups: list[str],
    run: Callable[[Spec], torch.Tensor],
    scales: Mapping[str, float] | None = None,
) -> list[tuple[str, str, Callable[[], torch.Tensor]]]:
    """(misconception, what the output equals, its thunk) for each knob of ``groups``; ``scales``:
    wrong scale factors by name ("1/sqrt(d_model) = ..."), each a ``wrong-scale`` variant."""
    out: list[tuple[str, str, Callable[[], torch.Tensor]]] = []
    for group in groups:
        for mid, shows, knobs in KNOBS[group]:
            out.append((mid, shows, _thunk(run, replace(spec, **knobs))))
    for name, factor in (scales or {}).items():
        out.append(
            (
                "wrong-scale",
                f"the scores scaled by {name} instead of 1/sqrt(head_dim)",
                _thunk(run, replace(spec, scale=factor)),
            )
        )
    return out


def _thunk(run: Callable[[Spec], torch.Tensor], spec: Spec) -> Callable[[], torch.Tensor]:
    return lambda: run(spec)


def module_suspects(
    x: torch.Tensor,
    p: Params,
    spec: Spec,
    groups: list[str],
    *,
    scales: Mapping[str, float] | None = None,
    **inputs: Any,
) -> Suspects:
    """Suspects of a module's output for ``x`` (and ``inputs``: context, keep, bias) with parameters
    ``p``."""

    def run(s: Spec) -> torch.Tensor:
        return forward(x, p, s, **inputs)

    variants = tuple(
        Variant(mid, f"the output of this module with {shows}", thunk)
        for mid, shows, thunk in module_variants(spec, groups, run, scales)
    )
    return Suspects((*variants, _fitted_scale(x, p, spec, run)))


def _fitted_scale(
    x: torch.Tensor, p: Params, spec: Spec, run: Callable[[Spec], torch.Tensor]
) -> Detector:
    """Any other constant scale of the scores (:mod:`~grader.testing.catalogue.scales`)."""
    d_out = p["W_query.weight"].shape[0]
    hd = d_out // spec.heads
    sizes = {"head_dim": hd, "d_out": d_out, "num_heads": spec.heads, "T": x.shape[-2]}
    if spec.kv_heads and spec.kv_heads != spec.heads:
        sizes["num_kv_heads * head_dim"] = spec.kv_heads * hd
    right = 1 / math.sqrt(hd) if spec.scale is None else spec.scale
    work = x.numel() // x.shape[-1] * x.shape[-2] * spec.heads  # scores per run (self-attention's)
    return scale_detector(lambda c: run(replace(spec, scale=c)), right, sizes, work)
