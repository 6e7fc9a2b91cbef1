"""Hostile modules (fork bomb, memory bomb) never cost the next, correct exercise a point, even on a loaded
machine: half of one CPU for everything the grade starts (:func:`tests.project.support.loaded.cpu_share`)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time

import pytest

from grader.grade import grade
from grader.sandbox.zygote_client import Zygote
from tests.project.support import loaded
from tests.project.support.common import CORPUS, needs_namespace, solutions_copy, starter_of

pytestmark = pytest.mark.cost(128)  # seconds on 2 cores: started early (tests/project/conftest.py)


BOMB_RUNS = 2  # grades per attack and kind of worker: 8 in all, each one a bomb on a loaded machine


@needs_namespace
@pytest.mark.slow
@pytest.mark.parametrize("forked", [False, True], ids=["cold", "forked"])
@pytest.mark.parametrize("attack", ["fork_bomb", "memory_bomb_touched"])
def test_bombs_never_cost_the_next_correct_exercise_a_point_on_a_loaded_machine(
    tmp_path, attack, forked
):
    """Fork bomb or memory bomb in `softmax`, then the correct `masks`, with half of one CPU for the grade's
    processes, the bomb's and the zygote's (:func:`loaded.cpu_share`); each attack graded twice in a freshly
    exec'd worker and twice in one forked from a zygote (separate tests, so that xdist can spread them)."""
    with loaded.cpu_share(0.5):
        zygote = (
            Zygote() if forked else None
        )  # started under the share: its forks stay in its group
        assert zygote is None or zygote.wait_ready()
        try:
            for run in range(BOMB_RUNS):
                sub = solutions_copy(tmp_path / f"sub{run}")
                shutil.copy(CORPUS / "hostile" / f"{attack}.py", sub / "softmax.py")
                card = grade(
                    sub,
                    isolation="namespace",
                    seed=run,
                    exercises=["softmax", "masks"],
                    per_test_time_limit=2,
                    starter=starter_of(zygote),
                )
                scores = {e["id"]: (e["score"], e["max_score"]) for e in card["exercises"]}
                assert card["status"] == "graded", (run, attack, card["error"])
                assert scores["masks"] == (8.0, 8.0), (run, attack, card["exercises"][-1]["tests"])
                assert scores["softmax"][0] == 0, (run, attack)
                if (
                    zygote is not None
                ):  # the grade really used the zygote, restarts after a kill included
                    assert (
                        card["isolation"]["worker_forks"] == card["isolation"]["worker_starts"] >= 1
                    ), card["isolation"]
        finally:
            if zygote is not None:
                zygote.close()


def test_the_share_holds_what_the_block_starts():
    """What the bomb tests rely on: a process started inside the block gets about half a CPU (0.6 s of CPU takes
    over a second), whichever way the share is made here."""
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6:\n    pass\n"
    with loaded.cpu_share(0.5) as how:
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-c", burn], check=True)
        wall = time.monotonic() - t0
    assert wall > 1.0, (how, wall)
