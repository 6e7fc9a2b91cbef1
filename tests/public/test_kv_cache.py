"""Public tests for `kv_cache`: the preallocated cache (update, overflow, reset) and decoding token by token or in
chunks, which must give the full causal forward while projecting each token once. The model is the grader's
stand-in GroupedQueryAttention (`student.isolated`): your decoding is checked on its own, whatever your GQA does.

A wrong decoding is diagnosed by formulas (:func:`suspects`): the whole sequence's attention, in float64, with one
thing changed as a mistake in the decoding loop changes it (each chunk's RoPE positions from 0, each chunk's mask
top-left, the unwritten zero slots visible, the ragged last chunk dropped, the kv heads tiled, the values rotated,
the scale of d_model); none of them is a cache."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

from grader.inside.standins import stand_in_apply_rope, stand_in_rope_frequencies
from grader.protocol.errors import StudentError
from grader.testing.attention import sdpa_math
from grader.testing.checks import expect, expect_shape, expect_tensor, fail, hinted
from grader.testing.diagnosis import Suspects, Variant, tag

pytestmark = pytest.mark.exercise("kv_cache")



def full_forward(x: torch.Tensor, p: dict[str, torch.Tensor], H: int, Hkv: int,
                 rope: tuple[int, float] | None = None) -> torch.Tensor:
    """What decoding must reproduce: the stand-in model's causal forward (SDPA with enable_gqa, stand-in rope)."""
    B, T, d = x.shape
    hd = d // H
    q, k, v = (F.linear(x, p[f"{n}.weight"], p.get(f"{n}.bias")) for n in ("W_query", "W_key", "W_value"))
    q = q.view(B, T, H, hd).transpose(1, 2)
    k, v = (t.view(B, T, Hkv, hd).transpose(1, 2) for t in (k, v))
    if rope is not None:
        tables = stand_in_rope_frequencies(hd, *rope)
        q, k = stand_in_apply_rope(q, *tables), stand_in_apply_rope(k, *tables)
    o = sdpa_math(q, k, v, is_causal=True, enable_gqa=True).transpose(1, 2).reshape(B, T, d)
    return F.linear(o, p["out_proj.weight"], p.get("out_proj.bias"))


def attend(x: torch.Tensor, p: dict[str, torch.Tensor], H: int, Hkv: int, max_len: int, *,
           positions: torch.Tensor | None = None, keep: torch.Tensor | None = None, zeros: torch.Tensor | None = None,
           pairing: str = "interleave", rope_values: bool = False, scale: float | None = None) -> torch.Tensor:
    """The stand-in model's causal attention over the whole of x in float64, by formula: RoPE rows at ``positions``
    (0 .. T-1), ``keep`` (T, T) the keys each token sees (causal), ``zeros`` (T,) how many zero keys (score 0, value
    0) each token also sees, ``pairing`` "repeat" (head h reads kv head h % Hkv), ``rope_values``, ``scale``."""
    B, T, d = x.shape
    hd, z = d // H, x.double()
    q, k, v = (F.linear(z, p[f"{n}.weight"].double(), None if p.get(f"{n}.bias") is None else p[f"{n}.bias"].double())
               .view(B, T, h, hd).transpose(1, 2) for n, h in (("W_query", H), ("W_key", Hkv), ("W_value", Hkv)))
    tables = stand_in_rope_frequencies(hd, max_len, dtype=torch.float64)
    pos = torch.arange(T) if positions is None else positions
    q, k = stand_in_apply_rope(q, *tables, pos), stand_in_apply_rope(k, *tables, pos)
    v = stand_in_apply_rope(v, *tables, pos) if rope_values else v
    owner = torch.arange(H) // (H // Hkv) if pairing == "interleave" else torch.arange(H) % Hkv
    k, v = k[:, owner], v[:, owner]
    s = (q @ k.transpose(-2, -1)) * (1 / math.sqrt(hd) if scale is None else scale)
    s = s.masked_fill(~(torch.ones(T, T, dtype=torch.bool).tril() if keep is None else keep), float("-inf"))
    extra = torch.zeros(T, max_len, dtype=torch.float64).masked_fill(  # the zero keys each token sees
        torch.arange(max_len)[None, :] >= (torch.zeros(T) if zeros is None else zeros)[:, None], float("-inf"))
    w = torch.softmax(torch.cat((s, extra.expand(B, H, T, max_len)), dim=-1), dim=-1)[..., :T]
    o = (w @ v).transpose(1, 2).reshape(B, T, d)
    return F.linear(o, p["out_proj.weight"].double(), None if p.get("out_proj.bias") is None
                    else p["out_proj.bias"].double()).to(x.dtype)


def suspects(x: torch.Tensor, p: dict[str, torch.Tensor], H: int, Hkv: int, max_len: int, size: int) -> Suspects:
    """What decoding x in chunks of ``size`` gives with each misconception, by :func:`attend`."""
    T = x.shape[1]
    start = torch.arange(T) // size * size  # where each token's chunk starts
    end = torch.clamp(start + size, max=T)
    i = torch.arange(T)
    full = T - T % size

    def of(**knobs) -> Callable[[], torch.Tensor]:
        return lambda: attend(x, p, H, Hkv, max_len, **knobs)

    items = [Variant("positions-not-offset", "decoding whose RoPE positions restart at 0 in every chunk (not "
                     "cache.length + i)", of(positions=i - start)),
             Variant("mask-top-left", "decoding whose chunk mask is tril() of (t, S), top-left: each chunk's queries "
                     "see the oldest keys instead of the cached prefix and themselves",
                     of(keep=i[None, :] <= (i - start)[:, None])),
             Variant("cache-unwritten-slots", "decoding that attends to every slot of the cache, the unwritten ones "
                     "(zeros) too", of(zeros=max_len - end)),
             Variant("gqa-repeat", "decoding with the kv heads tiled by repeat() (query head h reads kv head "
                     "h % num_kv_heads), not repeat_interleave()", of(pairing="repeat")),
             Variant("rope-on-values", "decoding with the values rotated by RoPE too", of(rope_values=True)),
             Variant("wrong-scale", f"decoding with the scores scaled by 1/sqrt(d_model) = 1/sqrt({x.shape[-1]}) "
                     "instead of 1/sqrt(head_dim)", of(scale=1 / math.sqrt(x.shape[-1])))]
    if full != T:
        items.append(Variant("ragged-dropped", f"decoding without the shorter last chunk (tokens {full} .. {T - 1})",
                             lambda: attend(x, p, H, Hkv, max_len)[:, :full]))
    return Suspects(tuple(items))


def model_and_cache(student, d=16, H=4, Hkv=2, max_len=16, B=2, rope=True, dropout=0.0):
    kv = student.isolated.kv_cache
    with hinted("keep `from .grouped_query_attention import GroupedQueryAttention` in kv_cache.py: the tests build "
                "the grader's stand-in model through that name"):
        model = kv.GroupedQueryAttention(d, H, Hkv, dropout=dropout, rope=rope, max_len=max_len).eval()
    return model, kv.KVCache(B, Hkv, max_len, d // H)


@pytest.mark.points(3)
def test_update_returns_the_filled_prefix(student, gen):
    cache = student.isolated.kv_cache.KVCache(2, 3, 8, 4)
    buffers = cache.named_buffers()
    got = {k: tuple(v.shape) for k, v in buffers.items()}
    expect(got == {"k_cache": (2, 3, 8, 4), "v_cache": (2, 3, 8, 4)}, f"named_buffers() of KVCache(2, 3, 8, 4): got "
           f"{got}, expected k_cache and v_cache of shape (2, 3, 8, 4)",
           "allocate both at full size in __init__: self.register_buffer('k_cache', torch.zeros(...))")
    k1, v1 = torch.randn(2, 3, 3, 4, generator=gen), torch.randn(2, 3, 3, 4, generator=gen)
    k2, v2 = torch.randn(2, 3, 1, 4, generator=gen), torch.randn(2, 3, 1, 4, generator=gen)
    first = cache.invoke("update", k1, v1)
    expect_tensor(first[0], k1, what="keys returned by the first update (3 positions)",
                  hint="return only the filled prefix: self.k_cache[:, :, :self.length], never the unwritten slots")
    k_all, v_all = cache.invoke("update", k2, v2)
    expect_tensor(k_all, torch.cat([k1, k2], dim=2), what="keys after updates of 3 and 1 positions")
    expect_tensor(v_all, torch.cat([v1, v2], dim=2), what="values after updates of 3 and 1 positions")


@pytest.mark.points(2)
def test_overflow_is_refused(student, gen):
    cache = student.isolated.kv_cache.KVCache(1, 2, 5, 4)
    k = torch.randn(1, 2, 4, 4, generator=gen)
    expect_shape(cache.invoke("update", k, k)[0], (1, 2, 4, 4), what="keys after writing 4 of 5 positions")
    with pytest.raises(StudentError) as info:
        cache.invoke("update", k[:, :, :2], k[:, :, :2])
        fail("writing positions 4 and 5 into KVCache(max_len=5) returned, expected a ValueError",
             "check self.length + t <= self.max_len BEFORE writing, and raise ValueError otherwise")
    expect(info.value.exc_type == "ValueError", f"overflowing update raised {info.value.exc_type} "
           f"({info.value.message}), expected a ValueError", "raise ValueError('KV cache overflow ...') yourself")


@pytest.mark.points(2)
def test_reset_starts_a_new_sequence(student, gen):
    cache = student.isolated.kv_cache.KVCache(1, 1, 6, 2)
    cache.invoke("update", torch.randn(1, 1, 5, 2, generator=gen), torch.randn(1, 1, 5, 2, generator=gen))
    cache.invoke("reset")
    k = torch.randn(1, 1, 4, 2, generator=gen)
    try:
        got = cache.invoke("update", k, -k)[0]
    except StudentError as exc:  # 5 + 4 positions overflow max_len 6: the count survived reset()
        fail(f"the first update (4 positions) after reset() of a KVCache(max_len=6) that held 5 raised "
             f"{exc.exc_type}: {exc.message.splitlines()[0][:160]}, expected the 4 keys back\n  " + tag(
                 "cache-reset", "your cache still counts the old sequence's 5 positions after reset(): the new one "
                 "overflows where it should start at position 0"))
    expect_tensor(got, k, what="keys returned by the first update after reset()")


@pytest.mark.points(4)
def test_token_by_token_decoding_gives_the_full_forward(student, gen):
    model, cache = model_and_cache(student)
    x = torch.randn(2, 10, 16, generator=gen)
    got = student.isolated.kv_cache.decode(model, cache, x)
    p = model.named_parameters()
    expect_tensor(got, full_forward(x, p, 4, 2, rope=(16, 10000.0)), suspects=suspects(x, p, 4, 2, 16, 1),
                  what="decode(model, cache, x of 10 tokens, chunk_size=1) vs the model's full causal forward")


@pytest.mark.points(3)
def test_chunked_decoding_gives_the_full_forward(student, gen):
    model, cache = model_and_cache(student)
    x = torch.randn(2, 11, 16, generator=gen)
    kv = student.isolated.kv_cache  # two calls: the second continues the sequence the cache holds
    got = torch.cat([kv.decode(model, cache, x[:, :6], chunk_size=3), kv.decode(model, cache, x[:, 6:], chunk_size=3)], 1)
    p = model.named_parameters()
    anew = Variant("decode-restarts", "tokens 6..10 decoded as a new sequence (positions from 0, tokens 0..5 forgotten): "
                   "decode() empties the cache first", lambda: torch.cat([full_forward(z, p, 4, 2, rope=(16, 10000.0))
                                                                          for z in (x[:, :6], x[:, 6:])], 1))
    expect_tensor(got, full_forward(x, p, 4, 2, rope=(16, 10000.0)), suspects=suspects(x, p, 4, 2, 16, 3) + Suspects(
        (anew,)), what="decode(model, cache, tokens 0..5, chunk_size=3), then decode(model, cache, tokens 6..10, "
                  "chunk_size=3) vs the full causal forward")


@pytest.mark.points(2)
def test_decoding_in_eval_mode_uses_no_dropout(student, gen):
    model, cache = model_and_cache(student, dropout=0.5)  # eval(): dropout is the identity
    x = torch.randn(2, 6, 16, generator=gen)
    kv = student.isolated.kv_cache
    got = kv.decode(model, cache, x, chunk_size=2)
    cache.invoke("reset")
    again = kv.decode(model, cache, x, chunk_size=2)
    expect_shape(got, (2, 6, 16), what="decode(model with dropout=0.5 in eval mode, cache, x of 6 tokens)")
    expect(bool(torch.equal(got, again)) or not bool(torch.isfinite(got).all()), "decode(model with dropout=0.5 in "
           "eval mode): two runs on the same x gave different outputs, expected the same\n  " + tag(
               "dropout-in-eval", "your decoding drops weights in eval mode: dropout must follow model.training "
               "(model.dropout(w), or F.dropout(w, p, training=model.training))"))
    expect_tensor(got, full_forward(x, model.named_parameters(), 4, 2, rope=(16, 10000.0)),
                  what="decode(model with dropout=0.5 in eval mode) vs the full causal forward")


@pytest.mark.points(2)
def test_large_scores_stay_finite(student, gen):
    model, cache = model_and_cache(student)
    x = torch.randn(2, 8, 16, generator=gen) * 30  # scores in the hundreds: exp(scores) alone overflows float32
    got = student.isolated.kv_cache.decode(model, cache, x, chunk_size=3)
    expect_shape(got, (2, 8, 16), what="decode(model, cache, x * 30 of 8 tokens)")
    bad = int((~torch.isfinite(got)).sum())
    expect(bad == 0, f"decode(model, cache, x * 30): got {bad} NaN/inf value(s) of {got.numel()}, expected all "
           "finite\n  " + tag("softmax-no-max", "your softmax overflows for scores of a few hundred: exp(s) without "
                              "the row max subtracted first (exp overflows above 88.7 in float32)"))
    expect_tensor(got, full_forward(x, model.named_parameters(), 4, 2, rope=(16, 10000.0)), atol=1e-4, rtol=1e-3,
                  what="decode(model, cache, x * 30 of 8 tokens, chunk_size=3) vs the full causal forward")


@pytest.mark.points(2)
def test_each_token_is_projected_once(student, gen):
    model, cache = model_and_cache(student)
    x = torch.randn(2, 12, 16, generator=gen)
    student.isolated.kv_cache.decode(model, cache, x)
    rows = model.named_buffers()["W_key.rows"]  # the stand-in's W_key counts the token rows it projects
    expect(int(rows) == 2 * 12, f"decoding 2 sequences of 12 tokens projected {int(rows)} token rows through "
           "W_key, expected 24", "project only the NEW tokens of each step; the cache holds the earlier keys")
