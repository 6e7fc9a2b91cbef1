"""Hidden tests for `rope`: the tables against float64 angles (defaults, base and max_len edges, large positions), both
pairings against float64 hand rotations, the relative-position and norm properties, positions for decoding ((T,)
and (B, T)), inputs of any leading dims, dtypes (float64, half, bfloat16), the meta device, gradients and the
refusal of an odd head_dim and of empty tables.

A failed value is diagnosed with RoPE's catalogue (:mod:`grader.testing.catalogue.rope`). Partial credit follows
what is wrong: tables in Hugging Face's (max_len, head_dim) layout with the right values lose the layout's own test
only (their values are judged one column per pair, and the rotations are given tables in the student's layout,
:func:`given`), while wrong values lose the value tests."""

from __future__ import annotations

import pytest
import torch

from grader.protocol.errors import StudentError
from grader.testing.catalogue.rope import hf_layout, pairs_view, rotate_suspects, table_suspects
from grader.testing.checks import expect, expect_raises, expect_shape, expect_tensor
from grader.testing.devices import expect_on_input_device
from grader.testing.diagnosis import tag, watching
from grader.testing.gradients import expect_grads
from grader.testing.precision import expect_no_worse_than

pytestmark = pytest.mark.exercise("rope")

LAYOUT = ("your tables have head_dim columns, each pair's column twice (Hugging Face's (max_len, head_dim) layout); "
          "the specification asks for one column per pair, (max_len, head_dim // 2)")


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


@pytest.fixture
def given(student):
    """Tables as the student's apply_rope reads them: one column per pair, or each column twice where the
    student's own rope_frequencies returns Hugging Face's (max_len, head_dim) layout (priced by its own test,
    :func:`test_tables_have_one_column_per_pair`, not by every rotation)."""
    try:
        cos = student.rope.rope_frequencies(4, 2)[0]
    except (StudentError, TypeError, IndexError, KeyError):
        cos = None
    hf = type(cos) is torch.Tensor and tuple(cos.shape) == (2, 4) and tuple(pairs_view(cos, 4).shape) == (2, 2)
    return (lambda *ts: tuple(hf_layout(t) for t in ts)) if hf else (lambda *ts: ts)


def expect_table(got, want: torch.Tensor, head_dim: int, max_len: int, base: float, which: int, what: str) -> None:
    """A table's values, judged one column per pair whatever its layout, diagnosed with the tables' catalogue."""
    __tracebackhide__ = True
    expect_tensor(pairs_view(got, head_dim), want, what=what,
                  suspects=table_suspects(head_dim, max_len, base, which, want.dtype))


# ----------------------------------------------------------------------------------------------- the tables
TABLE_CASES = [  # (head_dim, max_len, base): defaults, the smallest tables, Llama 3's base, a tiny base
    (64, 128, None),
    (2, 1, 10000.0),
    (8, 50, 500000.0),
    (6, 9, 2.0),
]


@pytest.mark.points(0.25)
@pytest.mark.parametrize("head_dim,max_len,base", TABLE_CASES)
def test_tables_hold_the_rotation_angles(student, head_dim, max_len, base):
    args = (head_dim, max_len) if base is None else (head_dim, max_len, base)
    got = student.rope.rope_frequencies(*args)
    what = f"rope_frequencies{args}"
    expect(isinstance(got, (tuple, list)) and len(got) == 2, f"{what}: got {type(got).__name__}, expected (cos, sin)",
           "return the two tables as a tuple (cos, sin)")
    b = 10000.0 if base is None else base
    for which, (name, want) in enumerate(zip(("cos", "sin"), tables64(head_dim, max_len, b))):
        expect_table(got[which], want.float(), head_dim, max_len, b, which, f"{name} table of {what}")


@pytest.mark.points(1)
def test_tables_have_one_column_per_pair(student):
    for name, got in zip(("cos", "sin"), student.rope.rope_frequencies(8, 5)):
        hf = type(got) is torch.Tensor and tuple(got.shape) == (5, 8) and tuple(pairs_view(got, 8).shape) == (5, 4)
        expect(not hf, f"{name} table of rope_frequencies(8, 5): got shape (5, 8), expected (5, 4)\n  "
               + tag("rope-tables-layout", LAYOUT))
        expect_shape(got, (5, 4), what=f"{name} table of rope_frequencies(8, 5)")


@pytest.mark.points(0.5)
def test_float64_tables_are_float64_accurate(student):
    got = student.rope.rope_frequencies(16, 300, 10000.0, dtype=torch.float64)
    for which, (name, want) in enumerate(zip(("cos", "sin"), tables64(16, 300))):
        expect_table(got[which], want, 16, 300, 10000.0, which,
                     f"{name} table of rope_frequencies(16, 300, dtype=torch.float64)")


@pytest.mark.points(0.5)
def test_large_positions_keep_float32_accuracy(student):
    # in float32, m * theta_0 = 8191 carries an error up to 2^-11 ~ 5e-4 rad: computed in float64, cast once, the
    # tables are correctly rounded float32 values (within 1e-5 of the truth)
    got = student.rope.rope_frequencies(8, 8192)
    for which, (name, want) in enumerate(zip(("cos", "sin"), tables64(8, 8192))):
        table = pairs_view(got[which], 8)
        expect_shape(table, (8192, 4), what=f"{name} table of rope_frequencies(8, 8192)")
        expect_tensor(table[-64:], want[-64:].float(), what=f"{name} table rows 8128 .. 8191 of rope_frequencies(8, "
                      "8192)", suspects=table_suspects(8, 8192, 10000.0, which, torch.float32, slice(-64, None)))


@pytest.mark.points(0.75)
def test_odd_head_dim_is_refused_with_a_value_error(student, gen):
    x = torch.randn(1, 2, 3, 7, generator=gen)
    got = student.rope.rope_frequencies(6, 3)
    expect_table(got[0], tables64(6, 3)[0].float(), 6, 3, 10000.0, 0, "cos table of rope_frequencies(6, 3)")
    expect_raises(lambda: student.rope.rope_frequencies(7, 4), "ValueError", what="rope_frequencies(head_dim=7, 4)")
    expect_raises(lambda: student.rope.apply_rope(x, got[0], got[1]), "ValueError",
                  what="apply_rope(x with 7 features, tables of 3 columns)")


@pytest.mark.points(0.5)
def test_empty_tables_are_refused_with_a_value_error(student):
    got = student.rope.rope_frequencies(2, 1)  # the smallest tables there are: one position, one pair
    for which, (name, want) in enumerate(zip(("cos", "sin"), tables64(2, 1))):
        expect_table(got[which], want.float(), 2, 1, 10000.0, which, f"{name} table of rope_frequencies(2, 1)")
    for args in ((0, 4), (4, 0), (-2, 4)):
        expect_raises(lambda args=args: student.rope.rope_frequencies(*args), "ValueError",
                      what=f"rope_frequencies{args}")


# ----------------------------------------------------------------------------------------------- apply_rope
ROTATE_CASES = [  # (B, H, T, hd, max_len)
    (2, 3, 7, 8, 16),
    (1, 1, 2, 2, 2),  # one pair, two positions (position 0 alone cannot tell a rotation from none)
    (2, 2, 12, 6, 12),  # T == max_len, an odd number of pairs
]


def expect_rotation(got, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor | None = None,
                    *, interleaved: bool = False, what: str) -> None:
    """``got`` against x rotated by hand (float64 angles of the positions), diagnosed with the rotation's
    catalogue; (cos, sin) are the tables the student was given, one column per pair."""
    __tracebackhide__ = True
    pos = torch.arange(x.shape[-2]) if positions is None else positions
    angle = angles64(x.shape[-1], pos)
    want = rotate64(x, angle[:, None] if pos.dim() == 2 else angle, interleaved).to(x.dtype)
    expect_tensor(got, want, what=what, suspects=rotate_suspects(x, cos, sin, positions, interleaved=interleaved))


@pytest.mark.points(0.75)
@pytest.mark.parametrize("B,H,T,hd,max_len", ROTATE_CASES)
def test_apply_rope_matches_a_float64_rotation(student, given, gen, B, H, T, hd, max_len):
    cos, sin = tables64(hd, max_len)
    x = torch.randn(B, H, T, hd, generator=gen, dtype=torch.float64)
    expect_rotation(student.rope.apply_rope(x, *given(cos, sin)), x, cos, sin,
                    what=f"apply_rope(float64 x {(B, H, T, hd)}, tables of max_len {max_len})")


@pytest.mark.points(0.75)
@pytest.mark.parametrize("B,H,T,hd,max_len", ROTATE_CASES[:2])
def test_apply_rope_interleaved_matches_a_float64_rotation(student, given, gen, B, H, T, hd, max_len):
    cos, sin = tables64(hd, max_len)
    x = torch.randn(B, H, T, hd, generator=gen, dtype=torch.float64)
    expect_rotation(student.rope.apply_rope_interleaved(x, *given(cos, sin)), x, cos, sin, interleaved=True,
                    what=f"apply_rope_interleaved(float64 x {(B, H, T, hd)})")


@pytest.mark.points(0.5)
def test_the_two_pairings_differ_by_a_fixed_permutation(student, given, gen):
    cos, sin = tables64(8, 10)
    x = torch.randn(2, 2, 10, 8, generator=gen, dtype=torch.float64)
    perm = torch.cat((torch.arange(0, 8, 2), torch.arange(1, 8, 2)))  # interleaved layout -> half-split layout
    inter = student.rope.apply_rope_interleaved(x, *given(cos, sin))
    half = student.rope.apply_rope(x[..., perm].contiguous(), *given(cos, sin))
    expect_shape(inter, (2, 2, 10, 8), what="apply_rope_interleaved(x (2, 2, 10, 8))")
    expect_rotation(inter, x, cos, sin, interleaved=True, what="apply_rope_interleaved(x (2, 2, 10, 8))")
    expect_tensor(inter[..., perm], half, what="apply_rope_interleaved(x) permuted vs apply_rope(x permuted)")


@pytest.mark.points(1.25)
def test_scores_depend_only_on_the_offset(student, given, gen):
    cos, sin = tables64(16, 64)
    q = torch.randn(3, 16, generator=gen, dtype=torch.float64)
    k = torch.randn(3, 16, generator=gen, dtype=torch.float64)
    m = torch.randint(0, 30, (3,), generator=gen)
    n = torch.randint(0, 30, (3,), generator=gen)
    shift = int(torch.randint(1, 30, (1,), generator=gen))

    def score(pq: torch.Tensor, pk: torch.Tensor) -> torch.Tensor:
        rotated = []
        for z, p in ((q, pq), (k, pk)):
            x = z[:, None, None, :]  # (3, 1, 1, 16): every sequence at its own position
            got = student.rope.apply_rope(x, *given(cos, sin), positions=p[:, None])
            expect_rotation(got, x, cos, sin, p[:, None], what="apply_rope(x (3, 1, 1, 16), positions of shape (3, 1))")
            rotated.append(got)
        return (rotated[0] * rotated[1]).sum(-1).flatten()

    base_score = score(m, n)
    expect_tensor(score(m + shift, n + shift), base_score, what=f"q.k after shifting both positions by {shift}")


@pytest.mark.points(0.5)
def test_rotation_keeps_every_norm(student, given, gen):
    cos, sin = tables64(10, 40)
    x = torch.randn(2, 3, 40, 10, generator=gen, dtype=torch.float64) * 3
    for fn in ("apply_rope", "apply_rope_interleaved"):
        got = getattr(student.rope, fn)(x, *given(cos, sin))
        expect_shape(got, (2, 3, 40, 10), what=f"{fn}(x (2, 3, 40, 10))")
        expect_tensor(got.norm(dim=-1), x.norm(dim=-1), what=f"norms of the vectors {fn} returned")


@pytest.mark.points(1)
def test_positions_pick_the_rows_of_a_decoding_chunk(student, given, gen):
    cos, sin = tables64(8, 32)
    x = torch.randn(2, 2, 4, 8, generator=gen, dtype=torch.float64)
    start = int(torch.randint(5, 28, (1,), generator=gen))
    positions = torch.arange(start, start + 4)
    for fn, inter in (("apply_rope", False), ("apply_rope_interleaved", True)):
        expect_rotation(getattr(student.rope, fn)(x, *given(cos, sin), positions=positions), x, cos, sin, positions,
                        interleaved=inter, what=f"{fn}(x of 4 tokens, positions={start}..{start + 3})")


@pytest.mark.points(0.75)
def test_positions_per_sequence(student, given, gen):
    cos, sin = tables64(6, 50)
    x = torch.randn(3, 2, 5, 6, generator=gen, dtype=torch.float64)
    positions = torch.randint(0, 50, (3, 5), generator=gen)  # (B, T): every sequence at its own positions
    suspects = rotate_suspects(x, cos, sin, positions)
    with watching(suspects):  # (B, T) rows not unsqueezed over the heads fail to broadcast: the variant raises too
        got = student.rope.apply_rope(x, *given(cos, sin), positions=positions)
    expect_rotation(got, x, cos, sin, positions, what="apply_rope(x (3, 2, 5, 6), positions of shape (3, 5))")


@pytest.mark.points(0.25)
def test_sequences_longer_than_the_tables_are_refused(student, given, gen):
    cos, sin = tables64(4, 6)
    x = torch.randn(1, 1, 9, 4, generator=gen, dtype=torch.float64)
    expect_rotation(student.rope.apply_rope(x[:, :, :6], *given(cos, sin)), x[:, :, :6], cos, sin,
                    what="apply_rope(x of 6 tokens, tables of max_len 6)")
    expect_raises(lambda: student.rope.apply_rope(x, *given(cos, sin)), "ValueError",
                  what="apply_rope(x of 9 tokens, tables of max_len 6)")


@pytest.mark.points(0.5)
def test_any_leading_dims_share_the_positions(student, given, gen):
    # the docstring's promise: with positions None or (T,), x may be (T, hd) or (B, T, hd) as well as (B, H, T, hd)
    cos, sin = tables64(6, 20)
    x2 = torch.randn(7, 6, generator=gen, dtype=torch.float64)  # (T, hd): one head of one sequence
    x3 = torch.randn(3, 5, 6, generator=gen, dtype=torch.float64)  # (B, T, hd): before the heads are split
    positions = torch.arange(11, 16)
    for fn, inter in (("apply_rope", False), ("apply_rope_interleaved", True)):
        expect_rotation(getattr(student.rope, fn)(x2, *given(cos, sin)), x2, cos, sin, interleaved=inter,
                        what=f"{fn}(x of shape (7, 6))")
    expect_rotation(student.rope.apply_rope(x3, *given(cos, sin), positions=positions), x3, cos, sin, positions,
                    what="apply_rope(x of shape (3, 5, 6), positions=11..15)")


# ----------------------------------------------------------------------------------------------- dtypes, devices
@pytest.mark.points(0.5)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_half_precision_inputs_keep_their_dtype(student, given, gen, dtype):
    cos, sin = (t.float() for t in tables64(32, 64))
    x = torch.randn(2, 4, 64, 32, generator=gen).to(dtype)
    got = student.rope.apply_rope(x, *given(cos, sin))
    exact = rotate64(x, angles64(32, torch.arange(64)))
    expect_tensor(got, exact.to(dtype), what=f"apply_rope({dtype} x)", suspects=rotate_suspects(x, cos, sin))
    # rotating in float32 and rounding once gives the correctly rounded result (mean error ~0.25 ulp); rotating
    # in half precision rounds four times and measures 1.55-1.61x that on 20 draws (fp16 and bf16): 1.25x separates
    own = float((got.double() - exact).abs().mean())
    rounded = float((exact.to(dtype).double() - exact).abs().mean())
    expect(own <= 1.25 * rounded, f"apply_rope({dtype} x): mean error {own:.3g} against float64, expected at most "
           f"1.25x the correctly rounded result's {rounded:.3g}\n  " + tag(
               "precision-lowered", "your result rounds more than once: the rotation runs in half precision (the "
               "tables cast to x.dtype) instead of in float32 with one rounding at the end"))


@pytest.mark.points(0.5)
def test_tables_follow_the_dtype_argument(student):
    for dtype in (torch.float64, torch.float16):
        got = student.rope.rope_frequencies(4, 5, dtype=dtype)
        for which, (name, want) in enumerate(zip(("cos", "sin"), tables64(4, 5))):
            expect_table(got[which], want.to(dtype), 4, 5, 10000.0, which,
                         f"{name} table of rope_frequencies(4, 5, dtype={dtype})")


@pytest.mark.points(0.75)
def test_apply_rope_runs_on_the_inputs_device(student, given, gen):
    cos, sin = (t.float() for t in tables64(8, 16))
    x = torch.randn(2, 2, 5, 8, generator=gen)
    positions = torch.arange(3, 8)
    expect_rotation(student.rope.apply_rope(x, *given(cos, sin), positions=positions), x, cos, sin, positions,
                    what="apply_rope(x, positions=3..7)")
    for fn in ("apply_rope", "apply_rope_interleaved"):
        for kwargs in ({}, {"positions": positions}):
            expect_on_input_device(lambda fn=fn, kwargs=kwargs: getattr(student.rope, fn).on_meta(
                x, *given(cos, sin), **kwargs), what=f"{fn}(x, cos, sin{', positions' if kwargs else ''} on the meta "
                "device)")


# ----------------------------------------------------------------------------------------------- gradients
def _rope64(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool = False) -> torch.Tensor:
    angle = torch.atan2(sin, cos)[: x.shape[-2], : x.shape[-1] // 2]  # the tables' own angles (either layout)
    return rotate64(x, angle.detach(), interleaved)


@pytest.mark.points(0.5)
@pytest.mark.parametrize("fn", ["apply_rope", "apply_rope_interleaved"])
def test_gradient_is_the_inverse_rotation(student, given, gen, fn):
    cos, sin = given(*tables64(6, 9))
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
