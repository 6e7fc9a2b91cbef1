"""Hostile submissions, each graded end to end in the sandbox: valid scorecard, nothing forged.

Every case replaces `softmax.py` in an otherwise correct submission. The attack must not earn a
point on `softmax`, the correct `masks` module must keep all its points, and the grader (this
process) must survive. Runs under the namespace backend (root on Linux, as in CI).

Each attack is graded once per kind of worker (the ``graded`` fixture) and every test about it asserts
on that one scorecard. The per-test limit is 2 s of CPU (the manifest's are 10-30 s): the correct
`masks` tests use a small fraction of it, and each attempt at a sleeping call is stopped by the
wall-clock backstop (3 × the limit + 5 s) after 11 s instead of 20.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from grader import schema
from grader.grade import grade
from grader.sandbox import isolation
from grader.sandbox.zygote_client import Zygote
from tests.project.conftest import CORPUS, solutions_copy, starter_of

pytestmark = pytest.mark.cost(140)  # seconds on 2 cores: started early (tests/project/conftest.py)

HOSTILE = sorted((CORPUS / "hostile").glob("*.py"))
needs_namespace = pytest.mark.skipif("namespace" not in isolation.available(),
                                     reason="needs the namespace sandbox (root on Linux); fork bombs are unsafe without it")


LIMIT_S = 2.0  # per-test CPU seconds, through grade()'s own option


def _grade(sub: Path, zygote: Zygote | None) -> dict:
    card = grade(sub, isolation="namespace", seed=7, exercises=["softmax", "masks"], per_test_time_limit=LIMIT_S,
                 starter=starter_of(zygote))
    schema.validate("scorecard", card)  # an invalid scorecard is a grader bug
    if zygote is not None:  # every worker, restarts after a kill included, came from the zygote
        assert card["isolation"]["worker_forks"] == card["isolation"]["worker_starts"] >= 1
    return card


@pytest.fixture(scope="module")
def zygote() -> None:
    """Freshly exec'd workers here; test_hostile_forked.py runs every test about an attack again against workers
    forked from a zygote (a module of its own, so that xdist grades the two kinds side by side)."""
    return None


@pytest.fixture(scope="module")
def graded(zygote: Zygote | None, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], dict]:
    """``graded(attack)``: the scorecard of a correct submission whose `softmax.py` is that hostile module
    ('' for none at all), graded once per kind of worker and shared by every test that asserts on it."""
    cards: dict[str, dict] = {}

    def card(attack: str) -> dict:
        if attack not in cards:
            sub = solutions_copy(tmp_path_factory.mktemp(f"sub-{attack or 'missing'}"))
            if attack:
                shutil.copy(CORPUS / "hostile" / f"{attack}.py", sub / "softmax.py")
            else:
                (sub / "softmax.py").unlink()
            cards[attack] = _grade(sub, zygote)
        return cards[attack]

    return card


def _scores(card: dict) -> dict[str, tuple[float, float]]:
    return {e["id"]: (e["score"], e["max_score"]) for e in card["exercises"]}


def _messages(card: dict, exercise: str) -> str:
    return "\n".join(t["message"] for e in card["exercises"] if e["id"] == exercise for t in e["tests"])


@needs_namespace
@pytest.mark.slow
@pytest.mark.parametrize("attack", HOSTILE, ids=[p.stem for p in HOSTILE])
def test_hostile_module_earns_nothing_and_others_keep_their_points(attack, graded):
    card = graded(attack.stem)
    scores = _scores(card)
    assert card["status"] == "graded", card["error"]
    assert card["isolation"]["backend"] == "namespace"
    assert scores["softmax"][0] == 0, f"{attack.stem} earned {scores['softmax']}"
    assert scores["masks"][0] == scores["masks"][1] > 0, f"{attack.stem} cost the correct module points"
    assert card["score"] == scores["masks"][0]
    assert not _leftover_sandbox_processes(card["isolation"]["uid"])


@needs_namespace
def test_secrets_are_absent_inside_the_sandbox(graded):
    text = _messages(graded("reads_secrets"), "softmax")
    assert "STOLEN files=0 refs=0 frames=0 shadow=FileNotFoundError" in text, text


@needs_namespace
def test_a_worker_sees_the_same_bare_process_whether_forked_or_exec_d(graded):
    """Nothing of the zygote leaks into a forked worker: fds, environment, uid, trusted modules, threads."""
    text = _messages(graded("inspects_its_process"), "softmax")
    # fds: stdin (requests), stdout, stderr and the reply pipe (fd 3 when forked, its runner-side number when exec'd)
    assert re.search(r"PROBE uid=6\d{4} fds=\[0, 1, 2, \d+\] env=\['HOME', 'LANG', 'MALLOC_ARENA_MAX', 'MALLOC_MMAP_THRESHOLD_', "
                     r"'MKL_NUM_THREADS', 'OMP_NUM_THREADS', 'PATH', 'PYTHONDONTWRITEBYTECODE', 'TORCHINDUCTOR_CACHE_DIR', "
                     r"'USER'\] user=student trusted=\[\] threads=1", text), text


@needs_namespace
def test_network_is_unreachable_inside_the_sandbox(graded):
    text = _messages(graded("network_access"), "softmax")
    assert "NETWORK" in text and "connected" not in text, text


@needs_namespace
def test_timeouts_and_crashes_are_recorded_as_incidents(graded):
    card = graded("sleep_forever")
    outcomes = {t["outcome"] for e in card["exercises"] if e["id"] == "softmax" for t in e["tests"]}
    assert outcomes == {"timeout"}
    assert any(i["kind"] == "timeout" for i in card["incidents"])
    assert card["isolation"]["worker_starts"] >= 2  # restarted after the timeout, so masks still ran


@needs_namespace
@pytest.mark.parametrize("attack", ["forged_frame", "extra_reply"])
def test_a_protocol_violation_fails_the_rest_of_the_exercise_and_is_reported(graded, attack):
    """Both modules have a correct `softmax_stable`: it must not keep its points after the violation."""
    card = graded(attack)
    assert _scores(card)["softmax"][0] == 0 and _scores(card)["masks"] == (8.0, 8.0)
    assert [i["kind"] for i in card["incidents"]] == ["protocol"]
    assert "broke the protocol earlier in this exercise" in _messages(card, "softmax")


@needs_namespace
def test_forged_grader_labels_are_shown_as_the_students_own_exceptions(graded):
    card = graded("forged_labels")
    tests = [t for e in card["exercises"] if e["id"] == "softmax" for t in e["tests"]]
    assert {t["outcome"] for t in tests} == {"failed"} and card["incidents"] == []
    assert all(t["message"].startswith("your code raised an exception named ") for t in tests)
    assert card["isolation"]["worker_starts"] == 1  # no worker was stopped: nothing timed out or crashed


@needs_namespace
def test_a_flood_of_output_is_capped_and_never_reaches_the_scorecard(graded):
    card = graded("stdout_flood")
    assert any(i["kind"] == "output" for i in card["incidents"])
    assert "AAAA" not in str(card)


@needs_namespace
def test_missing_module_is_a_clear_not_found(graded):
    card = graded("")
    assert _scores(card)["softmax"][0] == 0 and _scores(card)["masks"][0] > 0
    assert "softmax.py not found" in _messages(card, "softmax")


def _leftover_sandbox_processes(uid: int, wait_s: float = 10.0) -> list[str]:
    """Processes of the sandbox's ``uid`` still alive after ``wait_s`` (a killed namespace takes a moment
    to reap). Only this grade's uid: a concurrent grader on the machine leases other uids."""
    deadline = time.monotonic() + wait_s
    while True:
        out = subprocess.run(["ps", "-eo", "uid=,pid=,stat=,comm="], capture_output=True, text=True).stdout
        alive = [line for line in out.splitlines()
                 if line.split() and int(line.split()[0]) == uid and "Z" not in line.split()[2]]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() != 0 or not isolation.LaunchSpec("process").cgroup_paths(),
                    reason="needs root and writable cgroup v1 pids/memory controllers")
def test_fork_bomb_under_the_process_backend_is_held_by_the_pids_cgroup(tmp_path):
    """Root ignores RLIMIT_NPROC; the slot's pids cgroup is what holds a root `process` sandbox."""
    sub = solutions_copy(tmp_path / "sub")
    shutil.copy(CORPUS / "hostile" / "fork_bomb.py", sub / "softmax.py")
    card = grade(sub, isolation="process", seed=7, exercises=["softmax", "masks"], per_test_time_limit=LIMIT_S)
    schema.validate("scorecard", card)
    assert card["isolation"]["cgroup"] == "v1"
    assert _scores(card)["softmax"][0] == 0 and _scores(card)["masks"] == (8.0, 8.0)
    for group in isolation.LaunchSpec("process").cgroup_paths():
        procs = Path(group) / "cgroup.procs"
        assert not procs.exists() or not procs.read_text().split(), "processes left in the slot's cgroup"
        os.rmdir(group)
