"""``grader grade`` starts the submission's first worker while it imports torch and pytest; under ``process``
as root (a leased uid, a Landlock view in which the worker cannot write) that worker must be the one that
grades. Before 0.4.16 it was told to write its submission's files itself, failed, and a cold worker followed:
two starts, about 3 s more a grade (and Gradescope's ``run_autograder`` 2.0x the floor instead of 1.4x)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.sandbox import shared_zygote
from tests.project.support import readable
from tests.project.support.common import solutions_copy

pytestmark = [
    pytest.mark.cost(20),  # seconds on 2 cores
    pytest.mark.skipif(
        os.geteuid() != 0, reason="`process` runs student code as a leased uid only as root"
    ),
]


@pytest.fixture(scope="module")
def python() -> Iterator[Path]:
    with readable.venv() as found:
        if found is None:
            pytest.skip("no Python of this version that an unprivileged uid can run")
        yield found


def test_the_worker_started_beside_the_imports_grades_under_process_as_root(python, tmp_path):
    sub = solutions_copy(tmp_path / "sub")
    (sub / "multihead_attention.py").unlink()  # a quicker grade; the rest of the references
    env = {
        **os.environ,
        shared_zygote.ENV: "0",
    }  # no zygote: the cold worker started beside the imports
    done = subprocess.run(
        [
            str(python),
            "-m",
            "grader",
            "grade",
            str(sub),
            "--isolation",
            "process",
            "--no-canary",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    card = json.loads(done.stdout)
    assert card["isolation"]["backend"] == "process" and card["isolation"]["uid"] >= 60000
    assert card["isolation"]["worker_starts"] == 1 and card["isolation"]["worker_forks"] == 0
    graded = {e["id"]: e for e in card["exercises"]}
    assert graded["softmax"]["score"] == graded["softmax"]["max_score"] > 0
    assert graded["multihead_attention"]["score"] == 0  # the missing file: graded, not skipped
