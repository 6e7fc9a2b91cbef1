"""Diagnoses added after the sixth blind set was measured (``heldout6_*``: written from the seeds and
from scratch, not from the catalogue): a softmax along a dim counted from the front, keys cached before
RoPE, one side's heads split without the transpose, a projection made with another one's weights, a
causal mask one key ahead, T == max_len refused, a KV cache's update that returns the prefix from before
its own write, and decode() that starts a new sequence on every call. Each is shown a learner's wrong output and the right
one: the slip is named, the right output names nothing."""

from __future__ import annotations

import re
import shutil

import pytest
import torch

from grader.course import manifest
from grader.scoring.runner import run_suites
from grader.testing.catalogue.softmax import softmax_suspects
from tests.project.support.common import CORPUS, solutions_copy

OWNER = {e.id: a for a in manifest.load_all() for e in a.exercises}  # exercise id -> its assignment


def ids(said: str | None) -> set[str]:
    found = re.findall(r"diagnosis \[([a-z0-9, -]+)\]", said or "")
    return {i for f in found for i in f.split(", ")}


def test_a_softmax_along_dim_1_of_batched_scores_is_also_named_dims_from_the_front() -> None:
    x = torch.randn(3, 5, 5, generator=torch.Generator().manual_seed(4))
    right = torch.softmax(x.double(), dim=-1).float()
    suspects = softmax_suspects(x, dim=-1)
    learner = torch.exp(x) / torch.exp(x).sum(dim=1, keepdim=True)  # dim=1, right for (T, T) scores
    assert ids(suspects.explain(learner, right, 1e-5, 1e-4)) == {
        "softmax-wrong-dim",
        "dims-from-front",
    }
    over_batch = torch.exp(x) / torch.exp(x).sum(
        dim=0, keepdim=True
    )  # no batch reading: wrong dim only
    assert ids(suspects.explain(over_batch, right, 1e-5, 1e-4)) == {"softmax-wrong-dim"}
    assert ids(suspects.explain(right.clone(), right, 1e-5, 1e-4)) == set()


CASES = [  # (exercise, corpus bug, the hidden test it fails first, the ids its message names)
    (
        "kv_cache",
        "heldout6_cache_before_rope",
        "test_token_by_token_decoding_gives_the_full_forward",
        {
            "cache-before-rope",
            "rope-only-queries",
            "positions-not-offset",
        },  # one-token chunks: equal
    ),
    (
        "grouped_query_attention",
        "heldout6_kv_view_no_transpose",
        "test_parameters_are_the_four_projections",
        {"heads-no-transpose"},
    ),
    (
        "grouped_query_attention",
        "heldout6_causal_diag0",
        "test_parameters_are_the_four_projections",
        {"mask-one-ahead"},
    ),
    (
        "grouped_query_attention",
        "heldout6_max_len_ge",
        "test_matches_sdpa_with_enable_gqa",
        {"cache-off-by-one"},
    ),
    (
        "kv_cache",
        "heldout6_update_returns_old_prefix",
        "test_buffers_are_preallocated_at_full_size",
        {"cache-returns-stale"},
    ),
    (
        "kv_cache",
        "heldout6_decode_resets_cache",
        "test_decoding_continues_after_a_prefill",
        {"decode-restarts"},
    ),
    (
        "self_attention",
        "heldout6_v2_value_from_key",
        "test_parameter_layout",
        {"queries-from-w-key"},
    ),
    (
        "simple_attention",
        "heldout6_softmax_dim1",
        "test_weights_match_float64_oracle_and_rows_sum_to_one",
        {"softmax-wrong-dim", "dims-from-front"},
    ),
]


@pytest.mark.parametrize(("exercise", "bug", "test", "named"), CASES, ids=[c[1] for c in CASES])
def test_the_hidden_suite_names_the_slip_and_nothing_on_the_reference(
    tmp_path, exercise: str, bug: str, test: str, named: set[str]
) -> None:
    assignment = OWNER[exercise]
    sub = solutions_copy(tmp_path / "sub")
    suite = [assignment.root / assignment.exercise(exercise).hidden_tests]

    def outcomes() -> list[tuple[str, str]]:
        results, _ = run_suites(suite, student=sub, seed=3, assignment=assignment, select=test)
        chosen = [(r.outcome, r.message or "") for r in results if r.name.startswith(test)]
        assert chosen, f"no test selected by {test}"
        return chosen  # the suite's other tests are listed as not run

    assert {o for o, _ in outcomes()} == {"passed"}
    shutil.copy(CORPUS / "buggy" / exercise / f"{bug}.py", sub / f"{exercise}.py")
    failed = next(m for o, m in outcomes() if o == "failed")
    assert ids(failed) == named, failed
