"""The worker's warm-up runs to the end before any test, also in a worker restarted mid-grade: a test's CPU
limit (as little as 2 s, sized from the reference) is never charged for the grader's first-use costs."""

from __future__ import annotations

import subprocess
import sys

import pytest

from grader.grade import grade
from grader.sandbox import choice
from tests.project.support.common import solutions_copy

PROBE = """
import sys
from grader.inside import warmup
warmup.warm_up()
print(warmup._done, "torch._dynamo" in sys.modules, flush=True)
"""


def test_the_warm_up_covers_every_path_including_the_meta_device():
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", PROBE], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "True"]


LEVELS = [lvl for lvl in ("namespace", "process") if lvl in choice.available()]


@pytest.mark.slow
@pytest.mark.parametrize(
    "level", LEVELS or [pytest.param("namespace", marks=pytest.mark.skip("no sandbox here"))]
)
def test_a_worker_restarted_between_exercises_charges_its_first_test_nothing_of_the_warm_up(
    tmp_path, level
):
    # softmax's tests leave memory behind, so masks gets a fresh worker (restarted mid-grade, its setup frame
    # already waiting); on a82af4e its first test was charged ~2 s of warm-up and timed out at a 2 s limit
    card = grade(
        solutions_copy(tmp_path / "sub"),
        isolation=level,
        seed=0,
        exercises=["softmax", "masks"],
        per_test_time_limit=2,
    )
    assert card["status"] == "graded", card["error"]
    assert [(e["id"], e["score"]) for e in card["exercises"]] == [("softmax", 6.0), ("masks", 8.0)]
    first = card["exercises"][1]["tests"][0]
    assert first["outcome"] == "passed" and first["cpu_s"] < 0.5, first
