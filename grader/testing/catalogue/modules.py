"""The attention modules' misconceptions (self, causal, multi-head, cross, grouped-query attention;
decaying attention and ALiBi in :mod:`~grader.testing.catalogue.decaying`), each a
:class:`~grader.testing.catalogue.heads.Spec` knob on the module's own parameters and the test's
inputs."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.nn.functional as F

from grader.testing.catalogue.heads import Params, Spec, forward, module_suspects
from grader.testing.diagnosis import Detector, Suspects, Variant
from grader.testing.dropout import eval_dropout


def causal_suspects(x: torch.Tensor, p: Params, *, context_length: int | None = None) -> Suspects:
    """``CausalAttention``: one head of d_out features, the causal mask, no output projection
    (``context_length``: the module's, for the mask left uncut)."""
    d_in, d_out = x.shape[-1], p["W_query.weight"].shape[0]
    spec = Spec(heads=1, causal=True, out_proj=False)
    scales = {
        f"1/d_out = 1/{d_out}": 1 / d_out,
        f"1/d_out**2 = 1/{d_out**2}": 1 / d_out**2,
        f"1/sqrt(d_in) = 1/sqrt({d_in})": 1 / math.sqrt(d_in),
    }
    found = module_suspects(
        x,
        p,
        spec,
        ["causal", "scale", "softmax", "queries", "bias"],
        scales=distinct_scales(scales, d_out),
    )
    dropout = Suspects((eval_dropout(lambda: _causal_weights_values(x, p)),))
    return _inverted_is_also_additive_eq_zero(found + _uncut(x, p, context_length, 1) + dropout)


def _causal_weights_values(x: torch.Tensor, p: Params) -> tuple[torch.Tensor, torch.Tensor]:
    """One causal head's right weights (B, T, T) and values (B, T, d_out), float64."""
    q, k, v = (
        F.linear(x.double(), p[f"{n}.weight"].double(), _bias(p, n))
        for n in ("W_query", "W_key", "W_value")
    )
    T = x.shape[-2]
    scores = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(
        torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")
    )
    return torch.softmax(scores, dim=-1), v


def _bias(p: Params, name: str) -> torch.Tensor | None:
    b = p.get(f"{name}.bias")
    return None if b is None else b.double()


def _uncut(x: torch.Tensor, p: Params, context_length: int | None, heads: int) -> Suspects:
    """The (context_length, context_length) mask used whole on (T, T) scores: raises as the
    student's code does."""
    if context_length is None:
        return Suspects()

    def scores() -> torch.Tensor:
        q, k = (x.double() @ p[f"{n}.weight"].double().T for n in ("W_query", "W_key"))
        if heads > 1:
            B, T, d = q.shape
            q, k = (t.view(B, T, heads, d // heads).transpose(1, 2) for t in (q, k))
        future = torch.ones(context_length, context_length, dtype=torch.bool).triu(1)
        return (q @ k.transpose(-2, -1)).masked_fill(future, float("-inf"))

    return Suspects(
        (
            Variant(
                "mask-not-sliced",
                f"scores.masked_fill(mask, -inf) with the whole ({context_length}, "
                f"{context_length}) mask, not its [:T, :T] corner",
                scores,
            ),
        )
    )


def self_suspects(x: torch.Tensor, p: Params) -> Suspects:
    """``SelfAttentionV1``/``V2`` (nn.Linear layout: V1's (d_in, d_out) matrices transposed): no
    mask, one head."""
    d_in, d_out = x.shape[-1], p["W_query.weight"].shape[0]
    scales = {
        f"1/d_out = 1/{d_out}": 1 / d_out,
        f"1/d_out**2 = 1/{d_out**2}": 1 / d_out**2,
        f"1/sqrt(d_in) = 1/sqrt({d_in})": 1 / math.sqrt(d_in),
    }
    found = module_suspects(
        x,
        p,
        Spec(heads=1, out_proj=False),
        ["scale", "softmax", "queries", "bias"],
        scales=distinct_scales(scales, d_out),
    )
    x64 = x.double()
    keys = x64 @ p["W_key.weight"].double().T
    return found + Suspects(
        (
            Variant(
                "keys-dot-t",
                "queries @ keys.T, where .T reverses every dim of a batch",
                lambda: (
                    x64
                    @ p["W_query.weight"].double().T
                    @ keys.permute(*range(keys.dim() - 1, -1, -1))
                ),
            ),
        )
    )


def mha_suspects(
    x: torch.Tensor, p: Params, heads: int, *, context_length: int | None = None
) -> Suspects:
    """The fused ``MultiHeadAttention``: causal, ``heads`` heads, out_proj."""
    d_out = p["W_query.weight"].shape[0]
    spec = Spec(heads=heads, causal=True)
    scales = {f"1/sqrt(d_out) = 1/sqrt({d_out})": 1 / math.sqrt(d_out)}
    return _inverted_is_also_additive_eq_zero(
        module_suspects(
            x,
            p,
            spec,
            ["causal", "scale", "softmax", "queries", "bias", "heads", "out_proj"],
            scales=distinct_scales(scales, d_out // heads),
        )
        + _uncut(x, p, context_length, heads)
    )


def wrapper_suspects(
    heads_out: Callable[[], list[torch.Tensor]], d_out: int, num_heads: int
) -> Suspects:
    """``MultiHeadAttentionWrapper``: its heads' outputs (``heads_out()``, each (B, T, d_out))
    concatenated on the wrong dim, or heads of d_out // num_heads features."""

    def narrow(got: torch.Tensor, expected: torch.Tensor) -> str | None:
        width = num_heads * (d_out // num_heads)
        return (
            f"{got.shape[-1]} = num_heads * (d_out // num_heads) features: each head was built with "
            "d_out // num_heads outputs, where every head of the wrapper has d_out"
            if got.shape[:-1] == expected.shape[:-1]
            and got.shape[-1] == width != expected.shape[-1]
            else None
        )

    return Suspects(
        (
            Variant(
                "concat-wrong-dim",
                "the heads' outputs concatenated along the tokens (dim 1) instead of the features",
                lambda: torch.cat(heads_out(), dim=1),
            ),
            Detector("head-width", narrow),
        )
    )


def cross_suspects(
    x: torch.Tensor, context: torch.Tensor, p: Params, heads: int, keep: torch.Tensor | None = None
) -> Suspects:
    """``CrossAttention``: queries from x, keys and values from the context, a padding mask,
    out_proj."""
    d = p["W_query.weight"].shape[0]
    groups = ["scale", "softmax", "queries", "bias", "heads", "out_proj", "cross"] + (
        ["padding"] if keep is not None else []
    )
    return module_suspects(
        x,
        p,
        Spec(heads=heads),
        groups,
        context=context,
        keep=keep,
        scales=distinct_scales({f"1/sqrt(d_model) = 1/sqrt({d})": 1 / math.sqrt(d)}, d // heads),
    )


def bind(run: Callable[..., torch.Tensor], **kwargs: Any) -> Callable[[], torch.Tensor]:
    return lambda: run(**kwargs)


def unfused(p: Params, heads: int, layout: str) -> dict[str, torch.Tensor]:
    """W_query/W_key/W_value (weights and biases) from the fused qkv, in the layout the output is
    read in."""
    w, b = p["qkv.weight"], p.get("qkv.bias")
    d = w.shape[1]
    hd = d // heads
    if layout == "[q | k | v]":
        rows = [torch.arange(r * d, (r + 1) * d) for r in range(3)]
    else:  # reshape(B, L, H, 3, hd): head h's q, k, v are consecutive blocks of hd
        rows = [
            torch.cat(
                [torch.arange(h * 3 * hd + r * hd, h * 3 * hd + (r + 1) * hd) for h in range(heads)]
            )
            for r in range(3)
        ]
    out: dict[str, torch.Tensor] = {}
    for name, idx in zip(("W_query", "W_key", "W_value"), rows):
        out[f"{name}.weight"] = w[idx]
        if b is not None:
            out[f"{name}.bias"] = b[idx]
    return out


def distinct_scales(scales: Mapping[str, float], head_dim: int) -> dict[str, float]:
    """The wrong factors that differ from the right one, 1/sqrt(head_dim) (at some sizes they
    coincide)."""
    right = 1 / math.sqrt(head_dim)
    return {name: f for name, f in scales.items() if abs(f - right) > 1e-9 * right}


def _inverted_is_also_additive_eq_zero(found: Suspects) -> Suspects:
    """``mask == 0`` on an additive 0/-inf causal mask keeps exactly the future: the inverted mask's
    output."""
    items = tuple(
        Variant(
            v.id,
            v.shows + " (a keep-mask read as a block-mask, or `mask == 0` on an additive "
            "0/-inf mask)",
            v.compute,
            ("additive-as-bool",),
        )
        if isinstance(v, Variant)
        and v.shows.startswith("the output of this module with the causal mask inverted")
        else v
        for v in found.items
    )
    return Suspects(items, found.facts)


def gqa_suspects(
    x: torch.Tensor, p: Params, heads: int, kv_heads: int, rope: tuple[int, float] | None = None
) -> Suspects:
    """``GroupedQueryAttention``: causal, ``kv_heads`` key/value heads shared by groups of query
    heads, out_proj, the (stand-in) RoPE on q and k when ``rope`` = (max_len, base)."""
    d = x.shape[-1]
    spec = Spec(heads=heads, kv_heads=kv_heads, causal=True, rope=rope)
    groups = (
        ["causal", "scale", "softmax", "heads", "out_proj"]
        + (["gqa"] if kv_heads < heads else [])
        + (["rope"] if rope else [])
    )
    found = module_suspects(
        x,
        p,
        spec,
        groups,
        scales=distinct_scales({f"1/sqrt(d_model) = 1/sqrt({d})": 1 / math.sqrt(d)}, d // heads),
    )
    if rope is not None and rope[1] != 10000.0:
        found += Suspects(
            (
                Variant(
                    "rope-base-ignored",
                    f"RoPE tables built with base 10000 instead of {rope[1]:g}",
                    lambda: forward(
                        x,
                        p,
                        Spec(heads=heads, kv_heads=kv_heads, causal=True, rope=(rope[0], 10000.0)),
                    ),
                ),
            )
        )
    return found
