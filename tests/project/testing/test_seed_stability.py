"""An unchanged submission gets the same verdict on every seed: the large-score inputs of the hidden suites.

Every grading run draws fresh inputs. The large-input tests used to scale them up (``x * 30``), which saturates
the softmax, so a wrong scale or bias was caught on some draws and not on others; with the severe cap, a scale
bug's exercise could go from full marks to half between two runs. Over six seeds, 25 of the 276 corpus bugs
failed a different set of tests on different seeds: 20 through a large-input test, 2 through a flash test in
which only luck made a later tile raise the running max. The scores are now shifted by one constant
(:mod:`grader.testing.regimes`) and that test's keys climb or fall across the tiles: those 22 bugs fail on every
seed (checked below on three more). One more, flash_backward's log-sum-exp taken before the last rescale, still
failed 1-3 of its tests depending on the seed (8.75-9.75 of 22 points over twelve seeds): the random part of the
climbing heads' scores could outweigh the climb, and the large-score test's shift replaced the climb. Those heads
now climb at every key on every draw, under the shift too: 8.75 on each of the twelve. An audit of the other 252 corpus
bugs on eight more seeds (101-108) found two self_attention bugs that a test off their topic failed on some seeds
only: the fresh-weights test's inputs made a naive softmax overflow on some draws, and the layout test computed
with uninitialised (torch.empty) weights, NaN or not. Both now pass those tests on every seed; the large-input and
fresh-weights tests catch them on every seed. The same audit of the public suites found one: rope's angles taken
in float32 failed the relative-position test on some draws (the hidden precision test is the one that catches it).
A later audit (40 seeds) found softmax's four held-out "shift by the whole tensor's max" bugs failing the float16
test on 27 draws of 40, where a row's random maximum lay far enough below another's: every row's maximum is now
one value there, and the +-1000 test catches that shift on every draw.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

import pytest
import torch

from grader.course import manifest
from grader.scoring.runner import run_suites
from grader.testing.regimes import SHIFT, constant_last_feature, shift_heads, shifted_qk
from tests.project.support.common import CORPUS, ROOT, solutions_copy

OWNER = {e.id: a for a in manifest.load_all() for e in a.exercises}  # exercise id -> its assignment
LARGE = "test_large_inputs_do_not_overflow"
FLASH_BWD = "test_large_scores_stay_finite_forward_and_backward"
CAUGHT_ON_SOME_SEEDS = {  # corpus bug -> the test that caught it on some of six seeds only, before
    "causal_attention/scale_by_d_out": LARGE,
    "cross_attention/scale_by_d_model": LARGE,
    **{
        f"decaying_attention/{b}": LARGE
        for b in ("decay_before_scaling", "positive_bias", "scale_by_embed_dim", "signed_distance")
    },
    "efficient_attention/flash_scale_by_E": "test_flash_is_stable_for_large_scores[scores_near_150]",
    "efficient_attention/flash_drops_ragged_tile": "test_flash_is_stable_for_large_scores[scores_near_minus_1000]",
    "efficient_attention/flash_no_rescale_of_acc": "test_flash_causal_rows_without_any_key_are_zero_not_nan",
    "efficient_attention/flash_no_rescale_of_denominator": "test_flash_causal_rows_without_any_key_are_zero_not_nan",
    **{
        f"flash_backward/{b}": FLASH_BWD
        for b in (
            "bwd_D_per_tile",
            "bwd_dk_unscaled",
            "bwd_dq_overwritten",
            "bwd_ds_scaled_twice",
            "bwd_no_scale",
            "fwd_lse_is_running_max",
        )
    },
    "flash_backward/fwd_lse_before_final_rescale": (
        "test_forward_is_tile_size_invariant[1]",
        "test_forward_lse_is_the_logsumexp_of_the_scaled_scores[13-13-True]",
        FLASH_BWD,
    ),
    "multihead_attention/scale_by_global_d_out": "test_fused_large_inputs_do_not_overflow",
    "scaled_dot_product/no_scaling": "test_large_scores_stay_finite",
    "scaled_dot_product/scale_by_E": "test_large_scores_stay_finite",
    "self_attention/no_scaling": LARGE,
    "self_attention/scale_by_sqrt_d_in": LARGE,
    "sliding_window/banded_no_scale": "test_banded_is_stable_for_large_scores",
    "simple_attention/heldout_context_scaled": "test_large_scores_do_not_overflow",
    "masks/heldout4_padding_width_from_longest": (
        "test_padded_keys_and_values_have_no_influence_in_sdpa",
        "test_causal_and_padding_masks_combine_into_a_float64_hand_oracle",
    ),
    "masks/heldout3_causal_tril_diagonal_one": "test_causal_and_padding_masks_combine_into_a_float64_hand_oracle",
}


PASSED_ON_SOME_SEEDS = {  # corpus bug -> (suite, a test off its topic that it failed on some of eight seeds only, before)
    "self_attention/naive_exp_softmax": (
        "hidden",
        "test_v1_fresh_weights_are_torch_rand_and_used",
    ),  # scores overflowed
    "self_attention/v1_empty_weights": (
        "hidden",
        "test_parameter_layout",
    ),  # uninitialised weights were NaN or not
    "rope/angles_in_float32": (
        "public",
        "test_scores_depend_only_on_the_relative_position",
    ),  # float32-accurate tables
    "causal_attention/naive_exp_softmax": (
        "hidden",
        "test_changing_future_tokens_leaves_earlier_outputs_unchanged",
    ),  # ten times larger tokens overflowed it
    **{  # a row far below the whole tensor's max underflowed to 0 / 0 (27 draws of 40)
        f"softmax/{b}": ("hidden", "test_stable_in_float16_keeps_dtype_and_has_no_overflow")
        for b in (
            "heldout4_stable_shift_by_global_max",
            "heldout5_softmax_stable_global_max",
            "heldout6_global_max_shift",
            "heldout7_global_max",
        )
    },
}


@pytest.mark.parametrize("bug", sorted(CAUGHT_ON_SOME_SEEDS))
def test_a_bug_once_caught_on_some_seeds_only_fails_its_test_on_every_seed(
    tmp_path, bug: str
) -> None:
    caught = CAUGHT_ON_SOME_SEEDS[bug]
    outcomes = _outcomes(tmp_path, bug, (caught,) if isinstance(caught, str) else caught)
    assert set(outcomes.values()) == {"failed"}, outcomes


@pytest.mark.parametrize("bug", sorted(PASSED_ON_SOME_SEEDS))
def test_a_test_off_the_bugs_topic_passes_it_on_every_seed(tmp_path, bug: str) -> None:
    """These bugs are caught elsewhere on every seed (the large-input, fresh-weights and hidden precision tests)."""
    suite, name = PASSED_ON_SOME_SEEDS[bug]
    outcomes = _outcomes(tmp_path, bug, (name,), suite=suite)
    assert set(outcomes.values()) == {"passed"}, outcomes


# honest formulations -> (their exercise, a test they failed on some draws only, before)
HONEST_ON_SOME_SEEDS = {  # float16's rounding of its log-sum-exp: 1 draw in 3 (bundled class: peggy)
    "softmax_torch_logsumexp": (
        "softmax",
        "test_stable_in_float16_keeps_dtype_and_has_no_overflow",
    ),
}


@pytest.mark.parametrize("style", sorted(HONEST_ON_SOME_SEEDS))
def test_an_honest_formulation_passes_on_every_seed(tmp_path, style: str) -> None:
    exercise_id, name = HONEST_ON_SOME_SEEDS[style]
    module = OWNER[exercise_id].exercise(exercise_id).module
    source = CORPUS / "honest" / style / f"{module}.py"
    outcomes = _outcomes(tmp_path, f"{exercise_id}/{style}", (name,), source=source)
    assert set(outcomes.values()) == {"passed"}, outcomes


def _outcomes(
    tmp_path: Path,
    bug: str,
    names: tuple[str, ...],
    *,
    suite: str = "hidden",
    source: Path | None = None,
) -> dict[tuple[int, str], str]:
    """{(seed, test): outcome} of the tests ``names`` of an exercise's hidden (or public) suite on a submission with
    corpus ``bug`` (or the module ``source``), on three seeds."""
    exercise_id, _ = bug.split("/")
    assignment = OWNER[exercise_id]
    exercise = assignment.exercise(exercise_id)
    sub = solutions_copy(tmp_path / "sub")
    shutil.copy(source or CORPUS / "buggy" / f"{bug}.py", sub / f"{exercise.module}.py")
    outcomes = {}
    for seed in (11, 12, 13):
        tests = exercise.hidden_tests if suite == "hidden" else exercise.public_tests
        results, _ = run_suites(
            [assignment.root / tests],
            student=sub,
            seed=seed,
            assignment=assignment,
            extra_args=["-k", " or ".join(sorted({n.split("[")[0] for n in names}))],
        )
        outcomes.update({(seed, r.name): r.outcome for r in results if r.name in names})
    assert len(outcomes) == 3 * len(names), outcomes
    return outcomes


def _hidden_module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        f"_hidden_{name}", ROOT / "tests" / "hidden" / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FLASH_BACKWARD_SUITE = _hidden_module("test_flash_backward")


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize(
    ("L", "S", "E", "dtype"),
    [
        (13, 13, 5, torch.float64),
        (23, 23, 4, torch.float64),
        (37, 37, 16, torch.float32),
        (20, 20, 16, torch.float32),
    ],
)
def test_flash_backward_inputs_raise_every_rows_max_at_each_key_of_the_rising_heads(
    seed, L, S, E, dtype
) -> None:
    """flash_backward's qkv: in even heads each key outscores every earlier key in every row (so every tile, the
    last included, raises the running max), with the large-score test's shift on the first feature too."""
    q, k, _ = FLASH_BACKWARD_SUITE.qkv(
        torch.Generator().manual_seed(seed), B=2, H=4, L=L, S=S, E=E, Ev=3, dtype=dtype
    )
    for q_, k_ in ((q, k), shifted_qk(q, k, feature=0)):
        s = _scores(q_, k_)  # (B, H, L, S)
        assert (s[:, 0::2].diff(dim=-1) > 0).all()
    assert torch.allclose(
        _scores(*shifted_qk(q, k, feature=0))
        - _scores(
            q.clone().index_fill_(-1, torch.tensor([0]), 0),
            k.clone().index_fill_(-1, torch.tensor([0]), 0),
        ),
        torch.tensor(SHIFT, dtype=torch.float64),
    )


def _scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return q.double() @ k.double().transpose(-2, -1) / q.shape[-1] ** 0.5


@pytest.mark.parametrize("seed", range(20))
def test_shifted_scores_overflow_a_naive_exp_and_leave_the_softmax_unsaturated(seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, 3, 20, 16, generator=gen), torch.randn(2, 3, 20, 16, generator=gen)
    up, down = shifted_qk(q, k), shifted_qk(q.double(), k.double(), -1000.0)
    base = (
        _scores(q[..., :-1], k[..., :-1]) * (15 / 16) ** 0.5
    )  # the other features' part, over sqrt(16)
    assert torch.allclose(_scores(*up) - base, torch.full_like(base, SHIFT), atol=1e-4)
    assert torch.exp(_scores(*up).float()).isinf().all()  # every score overflows float32's exp
    assert (torch.exp(_scores(*down)) == 0).all()  # and underflows float64's: 0 / 0 without the max
    weights = torch.softmax(_scores(*up), dim=-1)
    assert (
        weights.amax(dim=-1).median() < 0.6
    )  # x * 30 gives rows at 1.0: one-hot, a scale error invisible


@pytest.mark.parametrize("seed", range(5))
def test_shift_heads_adds_the_shift_to_every_head_of_a_linear_projection(seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    wq, wk = torch.nn.Linear(6, 8), torch.nn.Linear(6, 8)
    x = constant_last_feature(torch.randn(2, 7, 6, generator=gen))
    shift_heads(wq.weight, wk.weight, 4, b_query=wq.bias, b_key=wk.bias)
    with torch.no_grad():
        q, k = (
            wq(x).view(2, 7, 2, 4).transpose(1, 2),
            wk(x).view(2, 7, 2, 4).transpose(1, 2),
        )  # (B, H, T, hd)
    rest = (
        _scores(q[..., :-1], k[..., :-1]) * (3 / 4) ** 0.5
    )  # (B, H, T, T): the heads' other coordinates
    assert torch.allclose(_scores(q, k) - rest, torch.full_like(rest, SHIFT), atol=1e-3)
    assert torch.softmax(_scores(q, k), dim=-1).amax(dim=-1).median() < 0.9
