"""KV-cache decoding's misconceptions: chunk by chunk through the grader's stand-in model, with one
step changed (RoPE positions restarting at 0, the keys cached before RoPE, the chunk's mask aligned top-left, the unwritten slots
attended to, the ragged last chunk dropped, a reset that keeps the count, the kv heads tiled with
repeat, the values turned).

Trusted decoding code, run by the hidden suites only (it decodes, as the exercise does: it never
ships to students, :data:`grader.release.repository.RUNTIME` leaves it out).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.nn.functional as F

from grader.inside.standins import stand_in_apply_rope, stand_in_rope_frequencies
from grader.testing.catalogue.heads import merge_heads
from grader.testing.catalogue.scales import scale_detector
from grader.testing.diagnosis import Suspects, Variant
from grader.testing.variants import softmax


@dataclass(frozen=True)
class Decoding:
    """The model and the cache, and the knobs a misconception turns (after ``max_len``)."""

    heads: int
    kv_heads: int
    rope: tuple[int, float] | None  # (max_len, base) of the model's stand-in RoPE tables
    max_len: int  # the cache's
    # slots a previous sequence left written (zeros) and counted: a reset that keeps the count
    held: int = 0
    # "restart": 0 .. t-1 in every chunk; "keys-restart"/"queries-restart": one side;
    # "keys-unturned": the keys never turned (cached before RoPE)
    positions: str = "absolute"
    # "top-left": tril() of (t, S); "strict": the diagonal blocked; "none"
    align: str = "bottom-right"
    unwritten: bool = False  # every max_len slot attended to, the unwritten ones zeros
    drop_ragged: bool = False
    pairing: str = "interleave"
    rope_values: bool = False
    # keys and values repeated to every query head before the cache stores them
    grouped_cache: bool = False
    scale: float | None = None
    naive: bool = False
    softmax_dim: int = -1  # -2: over the chunk's queries; 1: over the heads
    # the permutation of (B, H, t, hd) before the reshape to (B, t, d): "1,2,3" is a view
    merge: str = "2,1,3"


def decode(
    x: torch.Tensor, p: Mapping[str, torch.Tensor], spec: Decoding, schedule: Sequence[int]
) -> torch.Tensor:
    """The outputs of decoding ``x`` (B, T, d) in chunks of ``schedule``'s sizes from an empty cache
    (float64 inside, float32 for ``naive``), concatenated."""
    dtype = x.dtype if spec.naive else torch.float64
    B, _, d = x.shape
    hd = d // spec.heads
    tables = (
        None
        if spec.rope is None
        else tuple(t.to(dtype) for t in stand_in_rope_frequencies(hd, *spec.rope))
    )
    keys = [torch.zeros(B, spec.kv_heads, spec.held, hd, dtype=dtype)]
    values = [torch.zeros(B, spec.kv_heads, spec.held, hd, dtype=dtype)]
    outs, start, length = [], 0, spec.held
    for t in schedule:
        if spec.drop_ragged and t < schedule[0]:
            break
        chunk = x[:, start : start + t].to(dtype)
        q, k, v = (
            _heads(F.linear(chunk, p[f"{n}.weight"].to(dtype), _bias(p, n, dtype)), h)
            for n, h in (
                ("W_query", spec.heads),
                ("W_key", spec.kv_heads),
                ("W_value", spec.kv_heads),
            )
        )
        if tables is not None:
            cos, sin = tables
            q, k = (
                z
                if spec.positions == f"{side}-unturned"
                else stand_in_apply_rope(z, cos, sin, torch.arange(t) + _offset(spec, side, length))
                for z, side in ((q, "queries"), (k, "keys"))
            )
            pos = torch.arange(t) + _offset(spec, "values", length)
            v = stand_in_apply_rope(v, cos, sin, pos) if spec.rope_values else v
        # written into a cache of kv_heads slots: raises as the student's copy does
        if spec.grouped_cache:
            buffer = torch.zeros(B, spec.kv_heads, spec.max_len, hd, dtype=dtype)
            buffer[:, :, length : length + t] = k.repeat_interleave(
                spec.heads // spec.kv_heads, dim=1
            )
        keys.append(k)
        values.append(v)
        length += t
        outs.append(_attend(q, torch.cat(keys, 2), torch.cat(values, 2), spec))
        outs[-1] = F.linear(
            merge_heads(outs[-1], spec.merge),
            p["out_proj.weight"].to(dtype),
            _bias(p, "out_proj", dtype),
        )
        start += t
    return torch.cat(outs, dim=1).to(x.dtype)


def _offset(spec: Decoding, side: str, length: int) -> int:
    """The first position of a chunk's ``side`` (queries, keys, values): the cache's length, or 0
    where the misconception restarts it."""
    return 0 if spec.positions in ("restart", f"{side}-restart") else length


def _heads(t: torch.Tensor, heads: int) -> torch.Tensor:
    B, T, d = t.shape
    return t.view(B, T, heads, d // heads).transpose(1, 2)


def _bias(p: Mapping[str, torch.Tensor], name: str, dtype: torch.dtype) -> torch.Tensor | None:
    b = p.get(f"{name}.bias")
    return None if b is None else b.to(dtype)


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, spec: Decoding) -> torch.Tensor:
    if spec.unwritten:
        pad = spec.max_len - k.shape[2]
        k, v = (torch.cat([z, z.new_zeros(*z.shape[:2], pad, z.shape[-1])], 2) for z in (k, v))
    group = spec.heads // spec.kv_heads
    owner = (
        torch.arange(spec.heads) // group
        if spec.pairing == "interleave"
        else torch.arange(spec.heads) % spec.kv_heads
    )
    k, v = k[:, owner], v[:, owner]
    t, S = q.shape[2], k.shape[2]
    s = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.shape[-1]) if spec.scale is None else spec.scale)
    diagonal = {"bottom-right": S - t, "top-left": 0, "strict": S - t - 1, "none": S}[spec.align]
    keep = torch.ones(t, S, dtype=torch.bool).tril(diagonal=diagonal)
    return softmax(s.masked_fill(~keep, float("-inf")), spec.softmax_dim, naive=spec.naive) @ v


KNOBS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    (
        "positions-not-offset",
        "decoding with the RoPE positions restarting at 0 in every chunk (not cache.length + i)",
        {"positions": "restart"},
    ),
    (
        "cache-before-rope",
        "decoding with the keys never turned by RoPE (written to the cache before apply_rope, or "
        "never passed to it), the queries turned at cache.length + i",
        {"positions": "keys-unturned"},
    ),
    (
        "positions-not-offset",
        "decoding with the keys turned at positions 0 .. t-1 of the chunk (the queries at cache.length + i)",
        {"positions": "keys-restart"},
    ),
    (
        "positions-not-offset",
        "decoding with the queries turned at positions 0 .. t-1 of the chunk (the keys at cache.length + i)",
        {"positions": "queries-restart"},
    ),
    (
        "mask-top-left",
        "decoding with each chunk's mask tril() of (t, S), top-left: the chunk's queries see the oldest "
        "keys instead of the cached prefix and themselves",
        {"align": "top-left"},
    ),
    (
        "mask-diagonal",
        "decoding with each chunk's mask blocking the query's own key too (the diagonal left out)",
        {"align": "strict"},
    ),
    ("mask-missing", "decoding with no causal mask inside a chunk", {"align": "none"}),
    (
        "cache-unwritten-slots",
        "decoding that attends to every slot of the cache, the unwritten ones (zeros) too",
        {"unwritten": True},
    ),
    ("ragged-dropped", "decoding without the shorter last chunk", {"drop_ragged": True}),
    (
        "gqa-repeat",
        "decoding with the kv heads tiled by repeat() (query head h reads kv head h % num_kv_heads)",
        {"pairing": "repeat"},
    ),
    ("rope-on-values", "decoding with the values turned by RoPE too", {"rope_values": True}),
    (
        "softmax-no-max",
        "decoding with exp(scores) not shifted by the row max, which overflows here",
        {"naive": True},
    ),
    (
        "cache-grouped-heads",
        "decoding that repeats the keys and values to every query head before writing them into "
        "the cache, which has num_kv_heads slots",
        {"grouped_cache": True},
    ),
    (
        "softmax-wrong-dim",
        "decoding with the softmax over the chunk's queries (dim -2) instead of the keys",
        {"softmax_dim": -2},
    ),
    (
        "softmax-wrong-dim",
        "decoding with the softmax over the heads (dim 1) instead of the keys",
        {"softmax_dim": 1},
    ),
    (
        "heads-no-transpose",
        "decoding with each chunk's heads merged back by view(B, t, d) without transposing "
        "(B, H, t, hd) first",
        {"merge": "1,2,3"},
    ),
)


def kv_suspects(
    x: torch.Tensor,
    p: Mapping[str, torch.Tensor],
    spec: Decoding,
    schedule: Sequence[int],
    rows: slice = slice(None),
) -> Suspects:
    """What decoding ``x`` by ``schedule`` gives (its ``rows``: the tokens the test compares) with
    each misconception."""

    def run(s: Decoding) -> Callable[[], torch.Tensor]:
        return lambda: decode(x, p, s, schedule)[:, rows]

    d = x.shape[-1]
    items = _knob_variants(all(t == 1 for t in schedule), lambda knobs: run(replace(spec, **knobs)))
    if d // spec.heads != d:
        items.append(
            Variant(
                "wrong-scale",
                f"decoding with the scores scaled by 1/sqrt(d_model) = 1/sqrt({d}) instead "
                "of 1/sqrt(head_dim)",
                run(replace(spec, scale=1 / math.sqrt(d))),
            )
        )
    hd = d // spec.heads
    sizes = {"head_dim": hd, "d_model": d, "num_kv_heads * head_dim": spec.kv_heads * hd}
    right = 1 / math.sqrt(hd) if spec.scale is None else spec.scale
    work = x.shape[0] * spec.heads * x.shape[1] * (x.shape[1] + spec.max_len)  # scores, at most
    fitted = scale_detector(
        lambda c: decode(x, p, replace(spec, scale=c), schedule)[:, rows], right, sizes, work
    )
    return Suspects((*items, fitted))


def _knob_variants(
    one_token: bool, run: Callable[[dict[str, Any]], Callable[[], torch.Tensor]]
) -> list[Variant]:
    """The knobs as variants. Keys never turned are also RoPE on the queries only; and where every
    chunk is one token, keys turned at position 0 of their chunk are keys never turned (cos 0 = 1):
    one variant names both mistakes instead of the first listed taking the other's place."""
    items = []
    for mid, shows, knobs in KNOBS:
        position = knobs.get("positions")
        if one_token and position == "keys-restart":
            continue
        also: tuple[str, ...] = ()
        if position == "keys-unturned":
            also = ("rope-only-queries",) + ("positions-not-offset",) * one_token
            shows += " (in one-token chunks, the same as keys turned at 0 in each)" * one_token
        items.append(Variant(mid, shows, run(knobs), also))
    return items


def reset_suspects(
    x: torch.Tensor,
    p: Mapping[str, torch.Tensor],
    spec: Decoding,
    schedule: Sequence[int],
    held: int,
) -> Suspects:
    """After ``held`` tokens and reset(): a reset that zeroes the slots but keeps their count."""
    return Suspects(
        (
            Variant(
                "cache-reset",
                f"decoding after a reset() that keeps length = {held}: the new sequence "
                f"continues at position {held} and attends to {held} zeroed slots",
                lambda: decode(x, p, replace(spec, held=held), schedule),
            ),
        )
    )
