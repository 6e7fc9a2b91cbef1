"""The detectors that read a mistake off the output instead of foreseeing it: a mask's band
(:mod:`grader.testing.catalogue.bands`) and a fitted scale (:mod:`grader.testing.catalogue.scales`).

Each is shown the wrong output a student's code gives (written here as a learner would write it, not by the
catalogue's own code) and must name the right mistake with the right numbers; shown the right output, another
mistake's output, or noise, it must name nothing."""

from __future__ import annotations

import math
import re

import pytest
import torch

from grader.testing.catalogue.bands import band_detector, band_of
from grader.testing.catalogue.efficient import formula_suspects
from grader.testing.catalogue.masks import causal_suspects
from grader.testing.catalogue.rope import table_suspects
from grader.testing.catalogue.rope import tables as rope_tables
from grader.testing.catalogue.ropefit import frequency_detector
from grader.testing.catalogue.scales import scale_detector
from grader.testing.catalogue.window import mask_suspects
from grader.testing.diagnosis import Suspects


def ids(said: str) -> set[str]:
    return {
        i for found in re.findall(r"diagnosis \[([a-z0-9, -]+)\]", said) for i in found.split(", ")
    }


def named(suspects: Suspects, got: torch.Tensor, want: torch.Tensor) -> set[str]:
    return ids(suspects.explain(got, want, 0.0, 0.0))


T = 7
ONES = torch.ones(T, T, dtype=torch.bool)


def learner_window(L: int, window: int, *, lo: int = 0, hi: int | None = None) -> torch.Tensor:
    """A window mask as a student writes it: keep j when lo <= i - j < hi (hi defaults to window)."""
    i, j = torch.arange(L)[:, None], torch.arange(L)[None, :]
    return (i - j >= lo) & (i - j < (window if hi is None else hi))


@pytest.mark.parametrize(
    "got,mid",
    [
        (ONES.tril(diagonal=-1), "mask-diagonal"),  # torch.tril(ones, -1)
        (ONES.triu(), "mask-inverted"),  # triu where tril was meant
        (ONES.triu(diagonal=1), "mask-inverted"),  # the blocked set used as the keep-mask
        (ONES.clone(), "mask-missing"),
    ],
)
def test_a_wrong_causal_band_is_named(got: torch.Tensor, mid: str) -> None:
    right = ONES.tril()
    assert named(causal_suspects(T), got, right) == {mid}


@pytest.mark.parametrize(
    "got,mid,width",
    [
        (learner_window(T, 3, hi=4), "window-off-by-one", "window + 1 = 4"),  # i - j <= window
        (learner_window(T, 3, hi=2), "window-off-by-one", "window - 1 = 2"),
        (
            learner_window(T, 3, lo=1, hi=4),
            "mask-diagonal",
            "when -3 <= j - i <= -1, the right one when -2",
        ),
        (
            learner_window(T, 3, lo=1),
            "mask-diagonal",
            "when -2 <= j - i <= -1, the right one when -2",
        ),
    ],
)
def test_a_wrong_window_band_is_named_with_its_numbers(
    got: torch.Tensor, mid: str, width: str
) -> None:
    right = learner_window(T, 3)
    said = mask_suspects(T, 3).explain(got, right, 0.0, 0.0)
    assert ids(said) == {mid}
    assert width in said, said


def test_the_band_of_a_mask_is_read_exactly() -> None:
    assert band_of(ONES.tril()) == (-(T - 1), 0)
    assert band_of(learner_window(T, 3)) == (-2, 0)
    assert band_of(ONES.tril()[None, None]) == (-(T - 1), 0)  # leading unit dims ignored
    assert band_of(torch.zeros(T, T, dtype=torch.bool)) is None  # nothing kept
    assert band_of(ONES.tril().float()) is None  # not a boolean mask


def test_a_mask_that_is_no_band_or_the_right_one_names_nothing() -> None:
    right = ONES.tril()
    holes = right.clone()
    holes[3, 1] = False  # one pair dropped: not constant along its diagonal
    assert band_detector().observe(holes, right) is None
    assert band_detector().observe(right.clone(), right) is None
    checker = ONES.clone()
    checker[::2, ::2] = False
    assert band_detector().observe(checker, right) is None


# ----------------------------------------------------------------------------------------------- scales
torch.manual_seed(0)
Q, K, V = (torch.randn(2, 3, 6, 8, dtype=torch.float64) for _ in range(3))
SIZES = {"head_dim": 8, "d_model": 24, "num_kv_heads * head_dim": 16}


def learner_attention(scale: float, softmax_dim: int = -1) -> torch.Tensor:
    """Attention as a student writes it, with their scale (float64: the oracle's own precision)."""
    s = Q @ K.transpose(-2, -1) * scale
    return torch.softmax(s, dim=softmax_dim) @ V


def run(c: float) -> torch.Tensor:
    w = torch.exp(Q @ K.transpose(-2, -1) * c)
    return (w / w.sum(-1, keepdim=True)) @ V  # the trusted side's own formula, written apart


RIGHT = 1 / math.sqrt(8)


@pytest.mark.parametrize(
    "scale,words",
    [
        (1.0, "1 (no scale)"),
        (1 / 8, "1/head_dim = 1/8"),  # the scale applied twice
        (1 / math.sqrt(24), "1/sqrt(d_model) = 1/sqrt(24)"),
        (1 / math.sqrt(16), "1/sqrt(num_kv_heads * head_dim) = 1/sqrt(16)"),
        (math.sqrt(8), "sqrt(head_dim) = sqrt(8)"),
        (0.21, "0.21"),  # a factor no formula explains: named in numbers
    ],
)
def test_a_wrong_scale_is_fitted_and_named(scale: float, words: str) -> None:
    said = scale_detector(run, RIGHT, SIZES).observe(
        learner_attention(scale), learner_attention(RIGHT)
    )
    assert said is not None and said[0] == "wrong-scale", said
    assert (
        f"scaled by {words}" in said[1] and "instead of 1/sqrt(head_dim) = 1/sqrt(8)" in said[1]
    ), said


@pytest.mark.parametrize(
    "got",
    [
        learner_attention(RIGHT),  # right
        learner_attention(RIGHT, softmax_dim=-2),  # another mistake: the softmax over the queries
        learner_attention(0.2) * 1.01,  # a rescaled output is no rescaled score
        torch.randn(2, 3, 6, 8, dtype=torch.float64),
    ],
    ids=["right", "softmax-dim", "output-scaled", "noise"],
)
def test_a_fitted_scale_names_nothing_it_cannot_reproduce(got: torch.Tensor) -> None:
    assert scale_detector(run, RIGHT, SIZES).observe(got, learner_attention(RIGHT)) is None


def test_the_formula_catalogue_fits_a_scale_and_blocks_the_diagonal() -> None:
    """Through a catalogue: efficient attention's formula suspects (causal, L = S)."""
    q, k, v = (t.to(torch.float32) for t in (Q, K, V))
    keep = torch.ones(6, 6, dtype=torch.bool).tril()
    strict = torch.ones(6, 6, dtype=torch.bool).tril(-1)

    def sdpa(mask: torch.Tensor, scale: float) -> torch.Tensor:
        s = (q @ k.transpose(-2, -1) * scale).masked_fill(~mask, float("-inf"))
        return torch.softmax(s, -1).nan_to_num(0.0) @ v

    suspects = formula_suspects(q, k, v, is_causal=True)
    right = sdpa(keep, RIGHT)
    assert named(suspects, sdpa(keep, 1 / math.sqrt(48)), right) == {"wrong-scale"}
    assert named(suspects, sdpa(strict, RIGHT), right) == {"mask-diagonal"}
    assert named(suspects, right.clone(), right) == set()


# ----------------------------------------------------------------------------------------------- RoPE tables
def learner_tables(theta: torch.Tensor, max_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Tables as a student builds them from their theta (float32, as rope_frequencies returns)."""
    angle = torch.outer(torch.arange(max_len, dtype=torch.float32), theta.float())
    return angle.cos(), angle.sin()


HD, MAX_LEN, BASE = 64, 128, 10000.0
PAIRS = torch.arange(0, HD, 2, dtype=torch.float64)  # 2i


@pytest.mark.parametrize("which", [0, 1], ids=["cos", "sin"])
@pytest.mark.parametrize(
    "theta,law",
    [
        (BASE ** (-2 * PAIRS / HD), "base ** (-4 * i / head_dim)"),  # arange(0, d, 2) times 2 again
        (
            BASE ** (-PAIRS / (HD / 2)),
            "base ** (-4 * i / head_dim)",
        ),  # the exponent over half the width
        (1000.0 ** (-PAIRS / HD), "base ** (-1.5 * i / head_dim)"),  # another base
        (1.0 / BASE**PAIRS / HD, ""),  # a precedence slip: no power law, the thetas still told
    ],
    ids=["doubled", "half-width", "base-1000", "precedence"],
)
def test_wrong_rope_frequencies_are_read_off_the_table(
    which: int, theta: torch.Tensor, law: str
) -> None:
    right = rope_tables(HD, MAX_LEN, BASE)[which].float()
    got = learner_tables(theta, MAX_LEN)[which]
    said = table_suspects(HD, MAX_LEN, BASE, which, torch.float32).explain(got, right, 1e-5, 1e-4)
    assert ids(said) == {"rope-frequencies"}, said
    assert law in said and "theta_i = base ** (-2i / head_dim) = [1, 0.7499" in said, said


def test_a_right_table_or_one_without_position_1_names_no_frequency() -> None:
    detector = frequency_detector(HD, BASE, 0, torch.arange(MAX_LEN))
    right = rope_tables(HD, MAX_LEN, BASE)[0].float()
    assert detector.observe(right.clone(), right) is None
    shifted = learner_tables(BASE ** (-PAIRS / HD), MAX_LEN + 1)[0][1:]  # positions 1 .. max_len
    assert (
        detector.observe(shifted, right) is None
    )  # not cos(m * theta) for m = 0 ..: left to its variant
    tail = frequency_detector(HD, BASE, 0, torch.arange(MAX_LEN)[-8:])
    assert tail.observe(right[-8:] * 0.5, right[-8:]) is None  # no row of position 1 to read
