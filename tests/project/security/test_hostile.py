"""A fork bomb under the `process` backend (no namespaces), where root ignores RLIMIT_NPROC: the slot's pids
cgroup holds it. Every other hostile submission is graded end to end, by both kinds of worker, as one class:
test_hostile_class.py and test_hostile_class_root.py (:mod:`tests.project.support.hostile_class`)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from grader import schema
from grader.grade import grade
from grader.sandbox import isolation
from tests.project.support.common import CORPUS, solutions_copy
from tests.project.support.hostile_class import LIMIT_S, scores

pytestmark = pytest.mark.cost(11)  # seconds on 2 cores: started early (tests/project/conftest.py)


@pytest.mark.skipif(
    os.name != "posix" or os.geteuid() != 0 or not isolation.LaunchSpec("process").cgroup_paths(),
    reason="needs root and writable cgroup v1 pids/memory controllers",
)
def test_fork_bomb_under_the_process_backend_is_held_by_the_pids_cgroup(tmp_path):
    """Root ignores RLIMIT_NPROC; the slot's pids cgroup is what holds a root `process` sandbox."""
    sub = solutions_copy(tmp_path / "sub")
    shutil.copy(CORPUS / "hostile" / "fork_bomb.py", sub / "softmax.py")
    card = grade(
        sub,
        isolation="process",
        seed=7,
        exercises=["softmax", "masks"],
        per_test_time_limit=LIMIT_S,
    )
    schema.validate("scorecard", card)
    assert card["isolation"]["cgroup"] == "v1"
    assert scores(card)["softmax"][0] == 0 and scores(card)["masks"] == (8.0, 8.0)
    for group in isolation.LaunchSpec("process").cgroup_paths():
        procs = Path(group) / "cgroup.procs"
        assert not procs.exists() or not procs.read_text().split(), (
            "processes left in the slot's cgroup"
        )
        os.rmdir(group)
