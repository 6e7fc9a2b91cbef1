"""Public tests for `kv_cache`: the preallocated cache (update, overflow, reset) and decoding token by token or in
chunks, which must give the full causal forward while projecting each token once. The model is the grader's
stand-in GroupedQueryAttention (`student.isolated`): your decoding is checked on its own, whatever your GQA does."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from grader.inside.standins import stand_in_apply_rope, stand_in_rope_frequencies
from grader.protocol.errors import StudentError
from grader.testing.attention import sdpa_math
from grader.testing.checks import expect, expect_shape, expect_tensor, fail, hinted

pytestmark = pytest.mark.exercise("kv_cache")

DECODE_HINT = ("per chunk: project only the new tokens, rotate q and k at positions cache.length .. + t - 1, "
               "k_all, v_all = cache.update(k, v), attend with a bottom-right causal mask "
               "torch.ones(t, S, dtype=torch.bool).tril(diagonal=S - t), merge the heads, model.out_proj")


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


def model_and_cache(student, d=16, H=4, Hkv=2, max_len=16, B=2, rope=True):
    kv = student.isolated.kv_cache
    with hinted("keep `from .grouped_query_attention import GroupedQueryAttention` in kv_cache.py: the tests build "
                "the grader's stand-in model through that name"):
        model = kv.GroupedQueryAttention(d, H, Hkv, rope=rope, max_len=max_len).eval()
    return model, kv.KVCache(B, Hkv, max_len, d // H)


@pytest.mark.points(4)
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


@pytest.mark.points(3)
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
    expect_tensor(cache.invoke("update", k, -k)[0], k, what="keys returned by the first update after reset()",
                  hint="reset() must set self.length back to 0")


@pytest.mark.points(5)
def test_token_by_token_decoding_gives_the_full_forward(student, gen):
    model, cache = model_and_cache(student)
    x = torch.randn(2, 10, 16, generator=gen)
    got = student.isolated.kv_cache.decode(model, cache, x)
    expect_tensor(got, full_forward(x, model.named_parameters(), 4, 2, rope=(16, 10000.0)),
                  what="decode(model, cache, x of 10 tokens, chunk_size=1) vs the model's full causal forward",
                  hint=DECODE_HINT)


@pytest.mark.points(4)
def test_chunked_decoding_gives_the_full_forward(student, gen):
    model, cache = model_and_cache(student)
    x = torch.randn(2, 11, 16, generator=gen)
    got = student.isolated.kv_cache.decode(model, cache, x, chunk_size=3)
    expect_tensor(got, full_forward(x, model.named_parameters(), 4, 2, rope=(16, 10000.0)),
                  what="decode(model, cache, x of 11 tokens, chunk_size=3) vs the full causal forward",
                  hint="a chunk of t new tokens after P cached ones: query i sits at position P + i and sees keys "
                       "0 .. P + i (tril(diagonal=S - t), not tril()); " + DECODE_HINT)


@pytest.mark.points(2)
def test_each_token_is_projected_once(student, gen):
    model, cache = model_and_cache(student)
    x = torch.randn(2, 12, 16, generator=gen)
    student.isolated.kv_cache.decode(model, cache, x)
    rows = model.named_buffers()["W_key.rows"]  # the stand-in's W_key counts the token rows it projects
    expect(int(rows) == 2 * 12, f"decoding 2 sequences of 12 tokens projected {int(rows)} token rows through "
           "W_key, expected 24", "project only the NEW tokens of each step; the cache holds the earlier keys")
