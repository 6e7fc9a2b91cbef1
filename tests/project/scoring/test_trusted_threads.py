"""A sandboxed grade's trusted side runs its suites on one torch thread, and gives the caller's back.

It computes only oracles on small tensors while the worker computes the student's code; with one OpenMP thread a
core its idle threads spun for the CPU the worker needs (benchmarks/trusted_threads.py measures it). An in-process
grade runs the student's code in this process: its threads are left as the caller set them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from grader.grade import grade
from grader.sandbox import choice
from grader.scoring import runner
from tests.project.support.common import solutions_copy

pytestmark = pytest.mark.cost(8)


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """torch's thread count at the moment pytest runs the hidden suites, one entry a grade."""
    counts: list[int] = []
    real = runner.pytest.main

    def spy(*args: object, **kwargs: object) -> object:
        counts.append(torch.get_num_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(runner.pytest, "main", spy)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield counts
    torch.set_num_threads(before)


def _sandboxed() -> str:
    for level in ("namespace", "process", "bwrap"):
        if level in choice.available():
            return level
    pytest.skip("no sandbox level is available here")


def test_a_sandboxed_grade_runs_its_suites_on_one_thread_and_restores_the_callers(
    seen: list[int], tmp_path: Path
) -> None:
    card = grade(solutions_copy(tmp_path / "sub"), isolation=_sandboxed(), exercises=["softmax"])
    assert card["status"] == "graded" and card["score"] == card["max_score"] > 0, card["error"]
    assert seen == [1] and torch.get_num_threads() == 2


def test_an_in_process_grade_keeps_the_callers_threads(seen: list[int], tmp_path: Path) -> None:
    card = grade(solutions_copy(tmp_path / "sub"), isolation="inprocess", exercises=["softmax"])
    assert card["status"] == "graded" and card["score"] == card["max_score"] > 0, card["error"]
    assert seen == [2] and torch.get_num_threads() == 2


def test_the_threads_come_back_when_the_suites_raise() -> None:
    before = torch.get_num_threads()
    with pytest.raises(RuntimeError), runner.torch_threads(1):
        assert torch.get_num_threads() == 1
        raise RuntimeError("a suite failed to run")
    assert torch.get_num_threads() == before
