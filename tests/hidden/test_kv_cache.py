"""Hidden tests for `kv_cache`, graded on its own: `student.isolated.kv_cache` decodes through the grader's stand-in
GroupedQueryAttention (its layers and stand-in rope tables; it cannot be called) and the stand-in apply_rope, so a
bug in the student's GQA or rope.py costs nothing here. The cache: preallocated buffers, the filled prefix, exact
fill, overflow refused without a write, reset, dtypes. Decoding: token by token and in chunks (ragged, larger than
T) equals the full causal forward for GQA, MQA and MHA, with and without rope; continuing after a prefill; float64
and bfloat16; large inputs (severe: an overflowing softmax caps the exercise); the meta device; dropout off in eval;
each token projected once (counted by the stand-in's layers); bounded memory (measure())."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from grader.inside.standins import StandInGroupedQueryAttention, stand_in_apply_rope, stand_in_rope_frequencies
from grader.protocol.errors import StudentError
from grader.testing.attention import sdpa_math
from grader.testing.catalogue.kv import Decoding, kv_suspects, reset_suspects
from grader.testing.checks import (at_the_limit, expect, expect_call, expect_raises, expect_shape, expect_tensor, fail,
                                   hinted)
from grader.testing.devices import expect_built_on_meta, expect_on_input_device
from grader.testing.diagnosis import Detector, Suspects, Variant, tag
from grader.testing.oracles import expect_repeatable
from grader.testing.precision import expect_no_worse_than
from grader.testing.regimes import expect_stable

pytestmark = pytest.mark.exercise("kv_cache")

UNWRITTEN = Suspects((Detector("cache-unwritten-slots", lambda got, want: (
    f"{got.shape[2]} positions returned where {want.shape[2]} are written: the unwritten slots (zeros) come back too"
    if got.dim() == 4 and got.shape[2] > want.shape[2] else None)),))
OVERFLOW = "outputs become inf or NaN for inputs of ordinary size (a softmax without the max subtracted)"
IMPORT_HINT = ("keep `from .grouped_query_attention import GroupedQueryAttention` in kv_cache.py: the grader builds "
               "its stand-in model through that name")


def full_forward(x: torch.Tensor, p: dict[str, torch.Tensor], H: int, Hkv: int,
                 rope: tuple[int, float] | None = None) -> torch.Tensor:
    """The stand-in model's causal forward: SDPA (math, enable_gqa) on the projections, stand-in rope on q and k."""
    B, T, d = x.shape
    hd = d // H
    q, k, v = (F.linear(x, p[f"{n}.weight"], p.get(f"{n}.bias")) for n in ("W_query", "W_key", "W_value"))
    q = q.view(B, T, H, hd).transpose(1, 2)
    k, v = (t.view(B, T, Hkv, hd).transpose(1, 2) for t in (k, v))
    if rope is not None:
        tables = [t.to(x.dtype) for t in stand_in_rope_frequencies(hd, *rope)]  # float32 buffers, then .to()
        q, k = stand_in_apply_rope(q, *tables), stand_in_apply_rope(k, *tables)
    o = sdpa_math(q, k, v, is_causal=True, enable_gqa=True).transpose(1, 2).reshape(B, T, d)
    return F.linear(o, p["out_proj.weight"], p.get("out_proj.bias"))


def chunks(T: int, size: int) -> list[int]:
    """The chunk sizes of decode(x of T tokens, chunk_size=size)."""
    return [size] * (T // size) + ([T % size] if T % size else [])


def expect_decode(student, model, cache, x, tables, max_len: int, chunk_size: int, what: str) -> None:
    """decode(model, cache, x, chunk_size) of the 4-head, 2-kv-head model from an empty cache gives the full forward;
    a failure is diagnosed with the decoding catalogue."""
    p = model.named_parameters()
    expect_call(lambda: student.isolated.kv_cache.decode(model, cache, x, chunk_size=chunk_size),
                full_forward(x, p, 4, 2, tables), what=what,
                suspects=kv_suspects(x, p, Decoding(4, 2, tables, max_len), chunks(x.shape[1], chunk_size)))


def setup(student, d=16, H=4, Hkv=2, max_len=16, B=2, rope=True, bias=False, base=10000.0, dropout=0.0,
          dtype=torch.float32):
    kv = student.isolated.kv_cache
    with hinted(IMPORT_HINT):
        model = kv.GroupedQueryAttention(d, H, Hkv, dropout, bias, rope=rope, max_len=max_len, rope_base=base)
    model.eval()
    if dtype != torch.float32:
        model.to(dtype=dtype)
    cache = kv.KVCache(B, Hkv, max_len, d // H, dtype=dtype)
    return model, cache, ((max_len, base) if rope else None)


# ----------------------------------------------------------------------------------------------- the cache
@pytest.mark.points(1)
def test_buffers_are_preallocated_at_full_size(student, gen):
    cache = student.isolated.kv_cache.KVCache(3, 2, 7, 5, dtype=torch.float64)
    got = {k: (tuple(v.shape), v.dtype) for k, v in cache.named_buffers().items()}
    want = {n: ((3, 2, 7, 5), torch.float64) for n in ("k_cache", "v_cache")}
    expect(got == want, f"named_buffers() of KVCache(3, 2, 7, 5, dtype=torch.float64): got {got}, expected {want}\n  " + (
        tag("dtype-ignored", "the buffers are not in the dtype asked for") if {s for s, _ in got.values()} == {(3, 2, 7, 5)}
        else tag("cache-unbounded", "the buffers are not preallocated at full size (batch_size, num_kv_heads, max_len, "
                 "head_dim): a cache that grows with torch.cat has no bound and copies at every step")))
    k = torch.randn(3, 2, 7, 5, generator=gen, dtype=torch.float64)
    expect_tensor(fill_to_the_brim(cache, k, 2 * k)[1], 2 * k, what="values after filling all 7 positions at once",
                  suspects=stale(0))
    default = student.isolated.kv_cache.KVCache(2, 1, 3, 4).named_buffers()
    got = {k: (tuple(v.shape), v.dtype) for k, v in default.items()}
    want = {n: ((2, 1, 3, 4), torch.float32) for n in ("k_cache", "v_cache")}
    expect(got == want, f"named_buffers() of KVCache(2, 1, 3, 4) (default dtype): got {got}, expected {want}\n  " + tag(
        "dtype-ignored", "the dtype argument's default is not torch.float32: a half-precision cache rounds every key and "
        "value of a float32 model"))


def fill_to_the_brim(cache, k: torch.Tensor, v: torch.Tensor):
    """``update`` of exactly max_len positions into an empty cache."""
    return at_the_limit(lambda: cache.invoke("update", k, v), limit=f"a cache holding exactly max_len = {k.shape[2]}",
                        what=f"update of {k.shape[2]} positions into an empty KVCache(max_len={k.shape[2]})")


@pytest.mark.points(1.25)
def test_updates_return_exactly_the_filled_prefix(student, gen):
    cache = student.isolated.kv_cache.KVCache(2, 2, 12, 3, dtype=torch.float64)
    keys, values = [], []
    for t in (1, 4, 2, 5):  # 12 positions in all: the last update fills the cache exactly
        keys.append(torch.randn(2, 2, t, 3, generator=gen, dtype=torch.float64))
        values.append(torch.randn(2, 2, t, 3, generator=gen, dtype=torch.float64))
        k_all, v_all = cache.invoke("update", keys[-1], values[-1])
        n = sum(k.shape[2] for k in keys)
        expect_tensor(k_all, torch.cat(keys, dim=2), what=f"keys returned after {len(keys)} updates ({n} positions)",
                      suspects=UNWRITTEN + not_advanced(keys[-1]) + stale(n - t))
        expect_tensor(v_all, torch.cat(values, dim=2), what=f"values returned after {len(keys)} updates",
                      suspects=UNWRITTEN + not_advanced(values[-1]) + stale(n - t))


def not_advanced(last: torch.Tensor) -> Suspects:
    """The last update's positions at position 0, where earlier ones were written: the length never moved
    (returned alone, or in front of what came before)."""
    t = last.shape[2]
    return Suspects((Detector("cache-length-not-advanced", lambda got, want: (
        "the last update's positions come back at position 0, as if written there: the update does not write "
        "after the positions already filled (self.length does not advance)"
        if got.dim() == 4 and got.shape[2] >= t and want.shape[2] > t and torch.equal(got[:, :, :t], last)
        else None)),))


def stale(before: int) -> Suspects:
    """The positions filled before this update, without its own: the slice returned is taken before the length
    advances."""
    return Suspects((Detector("cache-returns-stale", lambda got, want: (
        f"update returns the {before} position(s) filled before it, without the ones it just wrote: the returned "
        "slice is taken before self.length advances"
        if got.dim() == 4 and got.shape[2] == before < want.shape[2] else None)),))


@pytest.mark.points(1.25)
def test_overflow_is_refused_and_writes_nothing(student, gen):
    cache = student.isolated.kv_cache.KVCache(1, 2, 6, 2, dtype=torch.float64)
    k = torch.randn(1, 2, 5, 2, generator=gen, dtype=torch.float64)
    cache.invoke("update", k, k)
    for t in (2, 7):
        ones = torch.ones(1, 2, t, 2, dtype=torch.float64)
        expect_raises(lambda o=ones: cache.invoke("update", o, o), "ValueError",
                      what=f"update of {t} positions into KVCache(max_len=6) holding 5")
    last = torch.randn(1, 2, 1, 2, generator=gen, dtype=torch.float64)
    try:
        k_all, _ = cache.invoke("update", last, last)
    except StudentError as exc:
        fail(f"an update of 1 position into KVCache(max_len=6) holding 5, after two refused ones, raised "
             f"{exc.exc_type}: {exc.message.splitlines()[0]}\n  " + tag(
                 "cache-write-before-check", "the refused updates changed the cache (its length): the check runs "
                 "after the write"))
    expect_tensor(k_all, torch.cat([k, last], dim=2), what="keys after two refused updates and one that fits",
                  suspects=Suspects((Detector("cache-write-before-check", lambda got, want: (
                      "the refused updates changed the cache: the check runs after the write" if got.shape != want.shape
                      or not torch.equal(got[:, :, :5], want[:, :, :5]) else None)),)))


@pytest.mark.points(0.5)
def test_the_cache_is_built_in_its_dtype_on_its_device(student, gen):
    cache = student.isolated.kv_cache.KVCache(1, 1, 4, 8, dtype=torch.float16)
    k = torch.randn(1, 1, 3, 8, generator=gen)
    k_all, v_all = cache.invoke("update", k, -k)
    expect_tensor(k_all, k.half(), what="keys of a float16 cache written with float32 keys")
    expect_tensor(v_all, -k.half(), what="values of a float16 cache")
    full = ((2, 3, 5, 8), "torch.float16")
    expect_built_on_meta(student.isolated.kv_cache.KVCache.on_meta(2, 3, 5, 8, dtype=torch.float16, device="meta"),
                         what="KVCache(2, 3, 5, 8, dtype=torch.float16, device='meta')",
                         buffers={"k_cache": full, "v_cache": full})


# ----------------------------------------------------------------------------------------------- decoding
DECODE_CASES = [  # (d, H, Hkv, rope, bias, base)
    (16, 4, 2, True, False, 10000.0),
    (16, 4, 1, False, True, 10000.0),  # MQA, no rope
    (12, 3, 3, True, True, 500000.0),  # MHA
    (24, 6, 3, True, False, 100.0),
]


@pytest.mark.points(0.75)
@pytest.mark.parametrize("d,H,Hkv,rope,bias,base", DECODE_CASES)
def test_token_by_token_decoding_gives_the_full_forward(student, gen, d, H, Hkv, rope, bias, base):
    model, cache, tables = setup(student, d, H, Hkv, max_len=16, rope=rope, bias=bias, base=base)
    x = torch.randn(2, 13, d, generator=gen)
    p = model.named_parameters()
    expect_call(lambda: student.isolated.kv_cache.decode(model, cache, x), full_forward(x, p, H, Hkv, tables),
                what=f"decode(x of 13 tokens, one at a time) through GroupedQueryAttention({d}, {H}, {Hkv}, "
                     f"rope={rope}, bias={bias})", suspects=kv_suspects(x, p, Decoding(H, Hkv, tables, 16), [1] * 13))


@pytest.mark.points(0.4)
@pytest.mark.parametrize("chunk_size", [2, 3, 5, 11, 15])
def test_chunked_decoding_gives_the_full_forward(student, gen, chunk_size):
    model, cache, tables = setup(student, max_len=16)
    x = torch.randn(2, 11, 16, generator=gen)
    expect_decode(student, model, cache, x, tables, 16, chunk_size, f"decode(x of 11 tokens, chunk_size={chunk_size})")


@pytest.mark.points(2)
def test_decoding_continues_after_a_prefill(student, gen):
    model, cache, tables = setup(student, max_len=20)
    x = torch.randn(2, 17, 16, generator=gen)
    p = model.named_parameters()
    want = full_forward(x, p, 4, 2, tables)
    P = int(torch.randint(3, 12, (1,), generator=gen))
    spec, order = Decoding(4, 2, tables, 20), [P, 2] + [1] * (15 - P)
    kv = student.isolated.kv_cache
    expect_call(lambda: kv.decode(model, cache, x[:, :P], chunk_size=P), want[:, :P], what=f"prefill of {P} tokens "
                "in one chunk", suspects=kv_suspects(x, p, spec, order, slice(0, P)))
    expect_call(lambda: kv.decode_step(model, cache, x[:, P:P + 2]), want[:, P:P + 2], what=f"decode_step of tokens "
                f"{P}, {P + 1} after a prefill of {P}", suspects=kv_suspects(x, p, spec, order, slice(P, P + 2)))
    anew = Suspects((Variant("decode-restarts", f"tokens {P + 2}..16 decoded as a new sequence (positions from 0, "
                             f"the {P + 2} before forgotten): decode() empties the cache first",
                             lambda: full_forward(x[:, P + 2:], p, 4, 2, tables)),))
    expect_call(lambda: kv.decode(model, cache, x[:, P + 2:]), want[:, P + 2:], what=f"decode of tokens {P + 2}..16, "
                "one at a time, after them", suspects=kv_suspects(x, p, spec, order, slice(P + 2, None)) + anew)


@pytest.mark.points(1)
def test_float64_decoding_is_exact(student, gen):
    model, cache, tables = setup(student, 16, 4, 2, max_len=12, B=3, bias=True, dtype=torch.float64)
    x = torch.randn(3, 12, 16, generator=gen, dtype=torch.float64)
    p = model.named_parameters()
    expect_call(lambda: student.isolated.kv_cache.decode(model, cache, x, chunk_size=5), full_forward(x, p, 4, 2, tables),
                what="float64 decode (chunk_size=5)", suspects=kv_suspects(x, p, Decoding(4, 2, tables, 12),
                                                                              chunks(12, 5)))


@pytest.mark.points(0.5)
def test_bfloat16_decoding_keeps_the_dtype_and_the_references_accuracy(student, reference, gen):
    model, cache, _ = setup(student, 32, 4, 2, max_len=24, rope=False, bias=True, dtype=torch.bfloat16)
    x = torch.randn(2, 24, 32, generator=gen).to(torch.bfloat16)
    got = student.isolated.kv_cache.decode(model, cache, x, chunk_size=5)
    params = model.named_parameters()
    twin = StandInGroupedQueryAttention(32, 4, 2, bias=True, max_len=24).to(torch.bfloat16).eval()
    twin.load_state_dict(params, strict=False)  # the same bfloat16 weights, decoded by the reference
    with torch.no_grad():
        kernel = reference.kv_cache.decode(twin, reference.kv_cache.KVCache(2, 2, 24, 8, dtype=torch.bfloat16), x, 5)
    exact = full_forward(x.double(), {n: w.double() for n, w in params.items()}, 4, 2)
    expect_no_worse_than(got, kernel, exact, what="decode of a bfloat16 model and cache (24 tokens, chunks of 5)")


@pytest.mark.severe(OVERFLOW)
@pytest.mark.points(0.5)
def test_large_inputs_do_not_overflow(student, gen):
    model, _, tables = setup(student, bias=True)
    x0 = torch.randn(2, 9, 16, generator=gen)
    x = x0 * 30  # scores in the hundreds: exp overflows float32
    params = {n: w.double() for n, w in model.named_parameters().items()}
    kv = student.isolated.kv_cache

    def fresh(inputs: torch.Tensor) -> torch.Tensor:  # each run on a cache of its own
        return kv.decode(model, kv.KVCache(2, 2, 16, 4), inputs, chunk_size=4)

    got = expect_stable(lambda: fresh(x), lambda: fresh(x0), what="decode(x * 30, chunk_size=4)")
    expect_tensor(got, full_forward(x.double(), params, 4, 2, tables).float(), what="decode(x * 30, chunk_size=4)",
                  atol=1e-3, rtol=1e-3)


@pytest.mark.points(0.5)
def test_dropout_is_off_in_eval_mode(student, gen):
    model, cache, tables = setup(student, dropout=0.3)
    x = torch.randn(2, 8, 16, generator=gen)
    decode = student.isolated.kv_cache.decode
    first = decode(model, cache, x)
    expect_repeatable(first, decode(model, student.isolated.kv_cache.KVCache(2, 2, 16, 4), x),
                      what="two decodes through an eval-mode model with dropout=0.3")
    p = model.named_parameters()
    expect_tensor(first, full_forward(x, p, 4, 2, tables), what="decode through an eval-mode model with dropout=0.3",
                  suspects=kv_suspects(x, p, Decoding(4, 2, tables, 16), [1] * 8))


@pytest.mark.points(0.5)
def test_bad_chunks_and_overflow_are_refused(student, gen):
    model, cache, tables = setup(student, max_len=6)
    x = torch.randn(2, 6, 16, generator=gen)
    expect_decode(student, model, cache, x, tables, 6, 4, "decode of exactly max_len tokens")
    for call, what in ((lambda: student.isolated.kv_cache.decode(model, cache, x[:, :1]), "a 7th token into max_len 6"),
                       (lambda: student.isolated.kv_cache.decode(model, cache, x, chunk_size=0), "chunk_size=0")):
        cache.invoke("reset") if "chunk" in what else None
        expect_raises(call, "ValueError", what=f"decode of {what}")


# ----------------------------------------------------------------------------------------------- no recomputation
@pytest.mark.points(1.25)
@pytest.mark.parametrize("chunk_size", [1, 4])
def test_each_token_is_projected_once(student, gen, chunk_size):
    model, cache, tables = setup(student, max_len=16)
    x = torch.randn(2, 14, 16, generator=gen)
    expect_decode(student, model, cache, x, tables, 16, chunk_size, f"decode(chunk_size={chunk_size})")
    counts = model.named_buffers()
    for layer in ("W_key", "W_value"):  # the stand-in's layers count the token rows they project
        rows = int(counts[f"{layer}.rows"])
        expect(rows == 2 * 14, f"decoding 2 sequences of 14 tokens (chunk_size={chunk_size}) sent {rows} token rows "
               f"through model.{layer}, expected 28: each token's key and value computed once\n  " + tag(
                   "recompute-prefix", "earlier tokens are projected again: the cache must hold their keys and values, "
                   "not the inputs"))


@pytest.mark.points(1)
def test_memory_stays_bounded_by_the_cache(student, gen):
    T = 512  # one (T, T) bool mask is 256 KiB, the scores of one step over the whole prefix 4 MiB
    model, cache, _ = setup(student, 16, 4, 2, max_len=T, B=1, rope=False)
    x = torch.randn(1, T, 16, generator=gen)
    got, stats = student.isolated.kv_cache.decode.measure(model, cache, x)
    expect_tensor(got, full_forward(x, model.named_parameters(), 4, 2), what=f"decode of {T} tokens", atol=1e-4)
    cache_bytes, out_bytes = 1 * 2 * T * 4 * 4, T * 16 * 4  # one float32 buffer (16 KiB); the output (32 KiB)
    limit = 4 * max(cache_bytes, out_bytes)  # the grouped keys are 2x a buffer; 4x leaves room, T x T does not fit
    expect(stats["max_tensor_bytes"] <= limit, f"the largest tensor made while decoding {T} tokens had "
           f"{stats['max_tensor_bytes']:.0f} bytes, expected at most {limit} (4x the larger of one cache buffer and "
           "the output)\n  " + tag("memory-full-matrix", "a (T, T)-sized tensor: a step needs only (B, H, t, S) "
                                    "scores and a (t, S) mask, never attention over the whole prefix again"))


@pytest.mark.points(1.5)
def test_reset_forgets_the_sequence(student, gen):
    model, cache, rope = setup(student, max_len=12)
    x = torch.randn(2, 7, 16, generator=gen)
    student.isolated.kv_cache.decode(model, cache, torch.randn(2, 9, 16, generator=gen), chunk_size=4)
    cache.invoke("reset")
    p = model.named_parameters()
    spec, order = Decoding(4, 2, rope, 12), [1] * 7
    expect_call(lambda: student.isolated.kv_cache.decode(model, cache, x), full_forward(x, p, 4, 2, rope),
                what="decoding 7 tokens after 9 others and reset()",
                suspects=reset_suspects(x, p, spec, order, 9) + kv_suspects(x, p, spec, order))
    k = torch.randn(2, 2, 5, 4, generator=gen)
    cache.invoke("reset")
    expect_tensor(cache.invoke("update", k, k)[0], k, what="keys of the first update after reset()")
    cache = student.isolated.kv_cache.KVCache(2, 2, 6, 4, dtype=torch.float64)  # reset, then refilled to max_len
    cache.invoke("update", *(torch.randn(2, 2, 4, 4, generator=gen, dtype=torch.float64),) * 2)
    cache.invoke("reset")
    k = torch.randn(2, 2, 6, 4, generator=gen, dtype=torch.float64)
    expect_tensor(cache.invoke("update", k, k)[0], k, what="keys of KVCache(2, 2, 6, 4, dtype=torch.float64) "
                  "refilled to its full length after reset()")


@pytest.mark.points(1)
def test_decoding_runs_on_the_inputs_device(student, gen):
    model, cache, tables = setup(student, max_len=12)
    x = torch.randn(2, 7, 16, generator=gen)
    expect_decode(student, model, cache, x, tables, 12, 3, "decode(x of 7 tokens, chunk_size=3)")
    for chunk_size in (1, 3):  # model, cache and x copied to the meta device: after the 7 tokens above
        expect_on_input_device(lambda c=chunk_size: student.isolated.kv_cache.decode.on_meta(model, cache, x[:, :4], c),
                               what=f"decode(model, cache, x, chunk_size={chunk_size}) with the model, the cache "
                                    "(7 tokens held) and x on the meta device")


# ----------------------------------------------------------------------------------------------- CUDA (extra)
@pytest.mark.cuda
@pytest.mark.points(0.5)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_cuda_half_precision_decoding_matches_the_fused_kernel(student, gen, dtype):
    """Decoding 256 tokens in chunks of 16 on the GPU in half precision: the error against float64 must be no worse
    than that of PyTorch's fused kernel running the full forward on the same half-precision projections."""
    model, cache, _ = setup(student, 512, 8, 2, max_len=256, B=2, rope=False, dtype=dtype)
    model.to(device="cuda")
    cache.to(device="cuda")
    x = (torch.randn(2, 256, 512, generator=gen) * 0.5).to(dtype)
    p = {n: t.to(device="cuda", dtype=dtype) for n, t in model.named_parameters().items()}
    q, k, v = (F.linear(x.cuda(), p[f"{n}.weight"]) for n in ("W_query", "W_key", "W_value"))
    q, k, v = (t.view(2, 256, -1, 64).transpose(1, 2) for t in (q, k, v))
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True).transpose(1, 2).reshape(2, 256, 512)
    kernel = F.linear(o, p["out_proj.weight"]).cpu()
    exact = full_forward(x.double(), {n: t.cpu().double() for n, t in p.items()}, 8, 2)
    got = student.isolated.kv_cache.decode(model, cache, x.cuda(), chunk_size=16)
    expect_shape(got, (2, 256, 512), what="decode on CUDA")
    expect_no_worse_than(got.cpu(), kernel, exact, what=f"decode on CUDA ({dtype}, 256 tokens in chunks of 16)")
