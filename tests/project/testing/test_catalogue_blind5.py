"""Diagnoses added after the fifth blind set was measured: a stable softmax summed along another dim, a
band anchored at the block's end, and the two KV-cache slips told by what ``update`` returns. Each is shown
a learner-written wrong output (computed here, apart from the catalogue's code) and the right one: the slip
is named, the right output names nothing."""

from __future__ import annotations

import re
import shutil

import pytest
import torch

from grader.course import manifest
from grader.scoring.collect import TestResult
from grader.scoring.runner import run_suites
from grader.testing.catalogue.softmax import softmax_suspects
from grader.testing.catalogue.window import banded_suspects
from tests.project.support.common import CORPUS, solutions_copy


def ids(said: str | None) -> set[str]:
    found = re.findall(r"diagnosis \[([a-z0-9, -]+)\]", said or "")
    return {i for f in found for i in f.split(", ")}


def test_a_stable_softmax_summed_along_the_last_dim_is_named_wrong_dim() -> None:
    x = torch.randn(2, 6, 7, generator=torch.Generator().manual_seed(1))
    e = torch.exp(x - x.max(dim=1, keepdim=True).values)
    learner = e / e.sum(dim=-1, keepdim=True)  # the max along dim 1, the sum along the last dim
    right = torch.softmax(x.double(), dim=1).float()
    suspects = softmax_suspects(x, dim=1)
    assert ids(suspects.explain(learner, right, 1e-5, 1e-4)) == {"softmax-wrong-dim"}
    assert ids(suspects.explain(right.clone(), right, 1e-5, 1e-4)) == set()


def _band_from_block_end(q, k, v, window: int, block: int) -> torch.Tensor:
    """A learner's blocked loop whose key range is the last `window` keys before the block's end."""
    T, out = q.shape[-2], []
    for start in range(0, T, block):
        end = min(start + block, T)
        lo = max(0, end - window)
        s = q[..., start:end, :] @ k[..., lo:end, :].transpose(-2, -1) / q.shape[-1] ** 0.5
        i = torch.arange(start, end)[:, None]
        j = torch.arange(lo, end)[None, :]
        s = s.masked_fill(~((j <= i) & (j > i - window)), float("-inf"))
        out.append(torch.softmax(s, dim=-1) @ v[..., lo:end, :])
    return torch.cat(out, dim=-2)


def test_a_band_anchored_at_the_blocks_end_is_named_band_range() -> None:
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(1, 2, 10, 4, generator=g, dtype=torch.float64) for _ in range(3))
    T, window, block = 10, 3, 4
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    keep = (j <= i) & (j > i - window)
    s = (q @ k.transpose(-2, -1) / 2.0).masked_fill(~keep, float("-inf"))
    right = torch.softmax(s, dim=-1) @ v
    learner = _band_from_block_end(q, k, v, window, block)
    assert torch.isnan(learner).any()  # the block's first queries have no key left
    suspects = banded_suspects(q, k, v, window, block)
    assert ids(suspects.explain(learner, right, 1e-5, 1e-4)) == {"band-range"}
    assert suspects.explain(right.clone(), right, 1e-5, 1e-4) == ""


@pytest.mark.parametrize(
    ("bug", "test", "named"),
    [
        (
            "heldout5_kv_length_never_advanced",
            "test_updates_return_exactly_the_filled_prefix",
            "cache-length-not-advanced",
        ),
        (
            "heldout5_kv_capacity_off_by_one",
            "test_buffers_are_preallocated_at_full_size",
            "cache-off-by-one",
        ),
    ],
)
def test_the_kv_cache_suite_names_what_update_shows(
    tmp_path, bug: str, test: str, named: str
) -> None:
    """Both detectors live in the hidden suite: the corpus bug fails its test with the id; the
    reference passes it."""
    assignment = manifest.load_all()[1]
    sub = solutions_copy(tmp_path / "sub")
    suite = [assignment.root / assignment.exercise("kv_cache").hidden_tests]

    def run() -> TestResult:
        results, _ = run_suites(suite, student=sub, seed=3, assignment=assignment, select=test)
        (result,) = [r for r in results if r.name == test]
        return result

    assert run().outcome == "passed"
    shutil.copy(CORPUS / "buggy" / "kv_cache" / f"{bug}.py", sub / "kv_cache.py")
    failed = run()
    assert failed.outcome == "failed" and ids(failed.message) == {named}, failed.message
