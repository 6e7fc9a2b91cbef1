"""Hidden tests for `rope`: the tables against float64 angles (defaults, base and max_len edges, large positions), both
pairings against float64 hand rotations, the relative-position and norm properties, positions for decoding ((T,)
and (B, T)), inputs of any leading dims, dtypes (float64, half, bfloat16), the meta device, gradients and the
refusal of an odd head_dim and of empty tables."""

from __future__ import annotations

import pytest
import torch

from grader.protocol.errors import StudentError
from grader.testing.checks import expect, expect_shape, expect_tensor, fail
from grader.testing.devices import expect_on_input_device
from grader.testing.gradients import expect_grads
from grader.testing.precision import expect_no_worse_than

pytestmark = pytest.mark.exercise("rope")

FREQ_HINT = ("theta_i = base ** (-2 i / head_dim) for i = 0 .. head_dim/2 - 1 (arange(0, head_dim, 2) / head_dim), "
             "angle[m, i] = m * theta_i for m = 0 .. max_len - 1; return (cos(angle), sin(angle))")
HALF_SPLIT_HINT = ("half-split pairing: pair i is (x[i], x[i + hd/2]): with x1 = x[..., :hd//2], x2 = x[..., hd//2:], "
                   "return cat(x1 * cos - x2 * sin, x1 * sin + x2 * cos) (rotate_half(x) = cat(-x2, x1), not cat(x2, -x1))")
INTERLEAVED_HINT = ("interleaved pairing: pair i is (x[2i], x[2i+1]); out[2i] = x[2i] cos - x[2i+1] sin, "
                    "out[2i+1] = x[2i] sin + x[2i+1] cos: stack the two on a new last dim and flatten")
POSITIONS_HINT = ("positions=None means rows 0 .. T-1 of the tables; a (T,) tensor picks rows cos[positions]; a (B, T) "
                  "one gives (B, T, hd/2) rows, unsqueezed to (B, 1, T, hd/2) to broadcast over the heads")


def angles64(head_dim: int, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """position * theta_i in float64, (*positions.shape, head_dim // 2)."""
    theta = torch.tensor([base ** (-2.0 * i / head_dim) for i in range(head_dim // 2)], dtype=torch.float64)
    return positions.double()[..., None] * theta


def rotate64(x: torch.Tensor, angle: torch.Tensor, interleaved: bool = False) -> torch.Tensor:
    """x rotated pair by pair in float64; angle broadcasts against x's pairs (..., T, hd/2)."""
    x = x.double()
    c, s = angle.cos(), angle.sin()
    if interleaved:
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2)
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1)


def tables64(head_dim: int, max_len: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    angle = angles64(head_dim, torch.arange(max_len), base)
    return angle.cos(), angle.sin()


# ----------------------------------------------------------------------------------------------- the tables
TABLE_CASES = [  # (head_dim, max_len, base): defaults, the smallest tables, Llama 3's base, a tiny base
    (64, 128, None),
    (2, 1, 10000.0),
    (8, 50, 500000.0),
    (6, 9, 2.0),
]


@pytest.mark.points(0.5)
@pytest.mark.parametrize("head_dim,max_len,base", TABLE_CASES)
def test_tables_hold_the_rotation_angles(student, head_dim, max_len, base):
    args = (head_dim, max_len) if base is None else (head_dim, max_len, base)
    got = student.rope.rope_frequencies(*args)
    what = f"rope_frequencies{args}"
    expect(isinstance(got, (tuple, list)) and len(got) == 2, f"{what}: got {type(got).__name__}, expected (cos, sin)",
           "return the two tables as a tuple (cos, sin)")
    cos, sin = tables64(head_dim, max_len, 10000.0 if base is None else base)
    expect_tensor(got[0], cos.float(), what=f"cos table of {what}", hint=FREQ_HINT)
    expect_tensor(got[1], sin.float(), what=f"sin table of {what}",
                  hint=FREQ_HINT + "; cos first, then sin")


@pytest.mark.points(0.5)
def test_float64_tables_are_float64_accurate(student):
    cos, sin = student.rope.rope_frequencies(16, 300, 10000.0, dtype=torch.float64)
    want_cos, want_sin = tables64(16, 300)
    hint = "compute the angles in float64 and cast to `dtype` at the end (not in float32 and then cast)"
    expect_tensor(cos, want_cos, what="cos table of rope_frequencies(16, 300, dtype=torch.float64)", hint=hint)
    expect_tensor(sin, want_sin, what="sin table of rope_frequencies(16, 300, dtype=torch.float64)", hint=hint)


@pytest.mark.points(0.5)
def test_large_positions_keep_float32_accuracy(student):
    # in float32, m * theta_0 = 8191 carries an error up to 2^-11 ~ 5e-4 rad: computed in float64, cast once, the
    # tables are correctly rounded float32 values (within 1e-5 of the truth)
    cos, sin = student.rope.rope_frequencies(8, 8192)
    want_cos, want_sin = tables64(8, 8192)
    hint = ("positions in the thousands: m * theta in float32 is off by ~m * 6e-8 rad; compute the angles in float64 "
            "(torch.arange(max_len, dtype=torch.float64)) and cast the cos and sin at the end")
    expect_tensor(cos[-64:], want_cos[-64:].float(), what="cos table rows 8128 .. 8191 of rope_frequencies(8, 8192)",
                  hint=hint)
    expect_tensor(sin[-64:], want_sin[-64:].float(), what="sin table rows 8128 .. 8191", hint=hint)


@pytest.mark.points(0.75)
def test_odd_head_dim_is_refused_with_a_value_error(student, gen):
    x = torch.randn(1, 2, 3, 7, generator=gen)
    ok_cos, ok_sin = student.rope.rope_frequencies(6, 3)
    expect_tensor(ok_cos, tables64(6, 3)[0].float(), what="cos table of rope_frequencies(6, 3)", hint=FREQ_HINT)
    for call, what in ((lambda: student.rope.rope_frequencies(7, 4), "rope_frequencies(head_dim=7, 4)"),
                       (lambda: student.rope.apply_rope(x, ok_cos, ok_sin), "apply_rope(x with 7 features, "
                        "tables of 3 columns)")):
        with pytest.raises(StudentError) as info:
            call()
            fail(f"{what} returned, expected a ValueError",
                 "RoPE rotates PAIRS of features: raise ValueError when head_dim is odd or the tables do not have "
                 "head_dim // 2 columns")
        expect(info.value.exc_type == "ValueError", f"{what} raised {info.value.exc_type} ({info.value.message}), "
               "expected a ValueError", "check head_dim % 2 == 0 (and the tables' width) and raise ValueError")


@pytest.mark.points(0.5)
def test_empty_tables_are_refused_with_a_value_error(student):
    cos, sin = student.rope.rope_frequencies(2, 1)  # the smallest tables there are: one position, one pair
    expect_tensor(cos, tables64(2, 1)[0].float(), what="cos table of rope_frequencies(2, 1)", hint=FREQ_HINT)
    expect_tensor(sin, tables64(2, 1)[1].float(), what="sin table of rope_frequencies(2, 1)", hint=FREQ_HINT)
    for args in ((0, 4), (4, 0), (-2, 4)):
        with pytest.raises(StudentError) as info:
            student.rope.rope_frequencies(*args)
            fail(f"rope_frequencies{args} returned, expected a ValueError",
                 "head_dim % 2 == 0 holds for 0 too: also require head_dim >= 2 and max_len >= 1, else raise "
                 "ValueError (empty tables only fail later, far from the cause)")
        expect(info.value.exc_type == "ValueError", f"rope_frequencies{args} raised {info.value.exc_type} "
               f"({info.value.message}), expected a ValueError", "check head_dim >= 2 and max_len >= 1 first")


# ----------------------------------------------------------------------------------------------- apply_rope
ROTATE_CASES = [  # (B, H, T, hd, max_len)
    (2, 3, 7, 8, 16),
    (1, 1, 1, 2, 1),  # one position, one pair
    (2, 2, 12, 6, 12),  # T == max_len, an odd number of pairs
]


@pytest.mark.points(0.75)
@pytest.mark.parametrize("B,H,T,hd,max_len", ROTATE_CASES)
def test_apply_rope_matches_a_float64_rotation(student, gen, B, H, T, hd, max_len):
    cos, sin = tables64(hd, max_len)
    x = torch.randn(B, H, T, hd, generator=gen, dtype=torch.float64)
    got = student.rope.apply_rope(x, cos, sin)
    expect_tensor(got, rotate64(x, angles64(hd, torch.arange(T))), what=f"apply_rope(float64 x {(B, H, T, hd)}, "
                  f"tables of max_len {max_len})", hint=HALF_SPLIT_HINT)


@pytest.mark.points(0.75)
@pytest.mark.parametrize("B,H,T,hd,max_len", ROTATE_CASES[:2])
def test_apply_rope_interleaved_matches_a_float64_rotation(student, gen, B, H, T, hd, max_len):
    cos, sin = tables64(hd, max_len)
    x = torch.randn(B, H, T, hd, generator=gen, dtype=torch.float64)
    got = student.rope.apply_rope_interleaved(x, cos, sin)
    expect_tensor(got, rotate64(x, angles64(hd, torch.arange(T)), interleaved=True),
                  what=f"apply_rope_interleaved(float64 x {(B, H, T, hd)})", hint=INTERLEAVED_HINT)


@pytest.mark.points(0.5)
def test_the_two_pairings_differ_by_a_fixed_permutation(student, gen):
    cos, sin = tables64(8, 10)
    x = torch.randn(2, 2, 10, 8, generator=gen, dtype=torch.float64)
    perm = torch.cat((torch.arange(0, 8, 2), torch.arange(1, 8, 2)))  # interleaved layout -> half-split layout
    inter = student.rope.apply_rope_interleaved(x, cos, sin)
    half = student.rope.apply_rope(x[..., perm].contiguous(), cos, sin)
    expect_shape(inter, (2, 2, 10, 8), what="apply_rope_interleaved(x (2, 2, 10, 8))")
    expect_tensor(inter[..., perm], half, what="apply_rope_interleaved(x) permuted vs apply_rope(x permuted)",
                  hint="the pairings rotate the same pairs by the same angles, only stored differently: "
                       + INTERLEAVED_HINT)


@pytest.mark.points(1.25)
def test_scores_depend_only_on_the_offset(student, gen):
    cos, sin = tables64(16, 64)
    q = torch.randn(3, 16, generator=gen, dtype=torch.float64)
    k = torch.randn(3, 16, generator=gen, dtype=torch.float64)
    m = torch.randint(0, 30, (3,), generator=gen)
    n = torch.randint(0, 30, (3,), generator=gen)
    shift = int(torch.randint(1, 30, (1,), generator=gen))

    def score(pq: torch.Tensor, pk: torch.Tensor) -> torch.Tensor:
        rq = student.rope.apply_rope(q[:, None, None, :], cos, sin, positions=pq[:, None])  # (3, 1, 1, 16)
        rk = student.rope.apply_rope(k[:, None, None, :], cos, sin, positions=pk[:, None])
        expect_shape(rq, (3, 1, 1, 16), what="apply_rope(x (3, 1, 1, 16), positions of shape (3, 1))")
        return (rq * rk).sum(-1).flatten()

    base_score = score(m, n)
    want = (rotate64(q, angles64(16, m)) * rotate64(k, angles64(16, n))).sum(-1)
    expect_tensor(base_score, want, what="q.k with q at positions m and k at n", hint=HALF_SPLIT_HINT)
    expect_tensor(score(m + shift, n + shift), base_score, what=f"q.k after shifting both positions by {shift}",
                  hint="rotate q and k by the angles of their own positions with the same tables: "
                       "(R_m q).(R_n k) = q.(R_(n-m) k)")


@pytest.mark.points(0.5)
def test_rotation_keeps_every_norm(student, gen):
    cos, sin = tables64(10, 40)
    x = torch.randn(2, 3, 40, 10, generator=gen, dtype=torch.float64) * 3
    for fn in ("apply_rope", "apply_rope_interleaved"):
        got = getattr(student.rope, fn)(x, cos, sin)
        expect_shape(got, (2, 3, 40, 10), what=f"{fn}(x (2, 3, 40, 10))")
        expect_tensor(got.norm(dim=-1), x.norm(dim=-1), what=f"norms of the vectors {fn} returned",
                      hint="each pair (a, b) becomes (a cos - b sin, a sin + b cos): sin and cos of the same angle")


@pytest.mark.points(1)
def test_positions_pick_the_rows_of_a_decoding_chunk(student, gen):
    cos, sin = tables64(8, 32)
    x = torch.randn(2, 2, 4, 8, generator=gen, dtype=torch.float64)
    start = int(torch.randint(5, 28, (1,), generator=gen))
    positions = torch.arange(start, start + 4)
    for fn, inter in (("apply_rope", False), ("apply_rope_interleaved", True)):
        got = getattr(student.rope, fn)(x, cos, sin, positions=positions)
        expect_tensor(got, rotate64(x, angles64(8, positions), inter), what=f"{fn}(x of 4 tokens, "
                      f"positions={start}..{start + 3})", hint=POSITIONS_HINT)


@pytest.mark.points(0.75)
def test_positions_per_sequence(student, gen):
    cos, sin = tables64(6, 50)
    x = torch.randn(3, 2, 5, 6, generator=gen, dtype=torch.float64)
    positions = torch.randint(0, 50, (3, 5), generator=gen)  # (B, T): every sequence at its own positions
    got = student.rope.apply_rope(x, cos, sin, positions=positions)
    want = rotate64(x, angles64(6, positions)[:, None])  # (B, 1, T, hd/2)
    expect_tensor(got, want, what="apply_rope(x (3, 2, 5, 6), positions of shape (3, 5))", hint=POSITIONS_HINT)


@pytest.mark.points(0.25)
def test_sequences_longer_than_the_tables_are_refused(student, gen):
    cos, sin = tables64(4, 6)
    x = torch.randn(1, 1, 9, 4, generator=gen, dtype=torch.float64)
    expect_tensor(student.rope.apply_rope(x[:, :, :6], cos, sin), rotate64(x[:, :, :6], angles64(4, torch.arange(6))),
                  what="apply_rope(x of 6 tokens, tables of max_len 6)", hint=HALF_SPLIT_HINT)
    with pytest.raises(StudentError) as info:
        student.rope.apply_rope(x, cos, sin)
        fail("apply_rope(x of 9 tokens, tables of max_len 6) returned, expected an error",
             "positions 6 .. 8 have no row in the tables: raise ValueError when T > max_len")
    expect(info.value.kind != "not_implemented", f"got {info.value.message}, expected an error about max_len")


@pytest.mark.points(0.5)
def test_any_leading_dims_share_the_positions(student, gen):
    # the docstring's promise: with positions None or (T,), x may be (T, hd) or (B, T, hd) as well as (B, H, T, hd)
    cos, sin = tables64(6, 20)
    x2 = torch.randn(7, 6, generator=gen, dtype=torch.float64)  # (T, hd): one head of one sequence
    x3 = torch.randn(3, 5, 6, generator=gen, dtype=torch.float64)  # (B, T, hd): before the heads are split
    positions = torch.arange(11, 16)
    hint = ("broadcast the (T, hd/2) rows against x's last two dims only (cos[:T], cos[positions]); do not reshape "
            "them to (1, 1, T, hd/2), which turns a (T, hd) input into a (1, 1, T, hd) output")
    for fn, inter in (("apply_rope", False), ("apply_rope_interleaved", True)):
        expect_tensor(getattr(student.rope, fn)(x2, cos, sin), rotate64(x2, angles64(6, torch.arange(7)), inter),
                      what=f"{fn}(x of shape (7, 6))", hint=hint)
    expect_tensor(student.rope.apply_rope(x3, cos, sin, positions=positions), rotate64(x3, angles64(6, positions)),
                  what="apply_rope(x of shape (3, 5, 6), positions=11..15)", hint=hint)


# ----------------------------------------------------------------------------------------------- dtypes, devices
@pytest.mark.points(0.5)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_half_precision_inputs_keep_their_dtype(student, gen, dtype):
    cos, sin = (t.float() for t in tables64(32, 64))
    x = torch.randn(2, 4, 64, 32, generator=gen).to(dtype)
    got = student.rope.apply_rope(x, cos, sin)
    expect(isinstance(got, torch.Tensor) and got.dtype == dtype, f"apply_rope({dtype} x, float32 tables): got "
           f"{getattr(got, 'dtype', type(got).__name__)}, expected {dtype}", "return the result in x.dtype")
    exact = rotate64(x, angles64(32, torch.arange(64)))
    expect_tensor(got, exact.to(dtype), what=f"apply_rope({dtype} x)")
    # rotating in float32 and rounding once gives the correctly rounded result (mean error ~0.25 ulp); rotating
    # in half precision rounds four times and measures 1.55-1.61x that on 20 draws (fp16 and bf16): 1.25x separates
    own = float((got.double() - exact).abs().mean())
    rounded = float((exact.to(dtype).double() - exact).abs().mean())
    expect(own <= 1.25 * rounded, f"apply_rope({dtype} x): mean error {own:.3g} against float64, expected at most "
           f"1.25x the correctly rounded result's {rounded:.3g}",
           "rotate in float32 (x.float(), the tables in float32) and cast to x.dtype once at the end")


@pytest.mark.points(0.5)
def test_tables_follow_the_dtype_argument(student):
    for dtype in (torch.float64, torch.float16):
        cos, sin = student.rope.rope_frequencies(4, 5, dtype=dtype)
        want_cos, want_sin = tables64(4, 5)
        expect_tensor(cos, want_cos.to(dtype), what=f"cos table of rope_frequencies(4, 5, dtype={dtype})",
                      hint="cast both tables to `dtype` at the end")
        expect_tensor(sin, want_sin.to(dtype), what=f"sin table of rope_frequencies(4, 5, dtype={dtype})",
                      hint="cast both tables to `dtype` at the end")


@pytest.mark.points(0.75)
def test_apply_rope_runs_on_the_inputs_device(student, gen):
    cos, sin = (t.float() for t in tables64(8, 16))
    x = torch.randn(2, 2, 5, 8, generator=gen)
    positions = torch.arange(3, 8)
    expect_tensor(student.rope.apply_rope(x, cos, sin, positions=positions),
                  rotate64(x, angles64(8, positions)).float(), what="apply_rope(x, positions=3..7)",
                  hint=POSITIONS_HINT)
    for fn in ("apply_rope", "apply_rope_interleaved"):
        for kwargs in ({}, {"positions": positions}):
            expect_on_input_device(lambda fn=fn, kwargs=kwargs: getattr(student.rope, fn).on_meta(x, cos, sin, **kwargs),
                                   what=f"{fn}(x, cos, sin{', positions' if kwargs else ''} on the meta device)")


# ----------------------------------------------------------------------------------------------- gradients
def _rope64(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool = False) -> torch.Tensor:
    angle = torch.atan2(sin, cos)[: x.shape[-2]]  # the tables' own angles: differentiable in x only
    return rotate64(x, angle.detach(), interleaved)


@pytest.mark.points(0.5)
@pytest.mark.parametrize("fn", ["apply_rope", "apply_rope_interleaved"])
def test_gradient_is_the_inverse_rotation(student, gen, fn):
    cos, sin = tables64(6, 9)
    x = torch.randn(2, 2, 9, 6, generator=gen, dtype=torch.float64)
    g = torch.randn(2, 2, 9, 6, generator=gen, dtype=torch.float64)
    inter = fn == "apply_rope_interleaved"
    expect_grads(getattr(student.rope, fn), (x,), lambda x, cos, sin: _rope64(x, cos, sin, inter), g,
                 what=f"{fn}(float64 x) backward", names=("x",), cos=cos, sin=sin)


# ----------------------------------------------------------------------------------------------- CUDA (extra)
@pytest.mark.cuda
@pytest.mark.points(0.5)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_cuda_half_precision_rotation_is_correctly_rounded(student, gen, dtype):
    """On the GPU, (B, H, T, hd) = (2, 8, 1024, 128) half inputs, float32 tables: the result must be about as close to
    float64 as the correctly rounded one (precision.expect_no_worse_than, with the rounded truth as the kernel)."""
    cos, sin = (t.float().cuda() for t in tables64(128, 2048))
    x = torch.randn(2, 8, 1024, 128, generator=gen).to(device="cuda", dtype=dtype)
    positions = torch.arange(1000, 2024, device="cuda")  # decoding far into the sequence
    got = student.rope.apply_rope(x, cos, sin, positions=positions)
    exact = rotate64(x.cpu(), angles64(128, positions.cpu()))
    expect_no_worse_than(got.cpu(), exact.to(dtype), exact, what=f"apply_rope on CUDA ({dtype}, positions 1000..2023)",
                         hint="rotate in float32 and cast to x.dtype once at the end; build nothing on the CPU")
