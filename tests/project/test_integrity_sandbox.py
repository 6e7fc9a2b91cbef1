"""End to end in the namespace sandbox: the red team's tricks earn nothing, and the memory figure
read from the sandbox's cgroup (outside the worker) holds where the worker's own figure is switched off.

Each trick replaces its exercise's module in an otherwise correct submission; the correct `masks`
module must keep its points. Every case runs with a cold worker and one forked from a zygote.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch

from grader import manifest, schema
from grader.grade import grade
from grader.sandbox import isolation, memwatch
from grader.sandbox.remote import SandboxBackend
from grader.sandbox.starters import ZygoteStarter
from grader.sandbox.zygote_client import Zygote
from tests.project.conftest import CORPUS, solutions_copy, starter_of

pytestmark = pytest.mark.cost(19)  # seconds on 2 cores: started early (tests/project/conftest.py)

INTEGRITY = CORPUS / "hostile" / "integrity"
ATTACKED = {"bans_cleared_via_sys_modules": "scaled_dot_product", "ban_stub_closure": "scaled_dot_product",
            "unpatched_alias_torch_c": "scaled_dot_product", "unpatched_alias_aten_op": "scaled_dot_product",
            "disables_dispatch_mode": "efficient_attention"}
MEMORY_TEST = "test_flash_never_materialises_the_score_matrix"
MiB = 1 << 20
needs_memory_cgroup = pytest.mark.skipif(
    "namespace" not in isolation.available() or memwatch.source(isolation.LaunchSpec("namespace").cgroup_paths())
    != "cgroup", reason="needs the namespace sandbox with a writable memory cgroup (root on Linux)")


def _grade(sub: Path, exercises: list[str], zygote: Zygote | None) -> dict:
    card = grade(sub, isolation="namespace", seed=11, exercises=exercises, starter=starter_of(zygote))
    schema.validate("scorecard", card)
    assert card["status"] == "graded", card["error"]
    assert card["isolation"]["memory_figure"] == "cgroup"
    if zygote is not None:
        assert card["isolation"]["worker_forks"] == card["isolation"]["worker_starts"] >= 1
    return card


@needs_memory_cgroup
@pytest.mark.slow
@pytest.mark.parametrize("trick", sorted(ATTACKED))
def test_each_trick_scores_zero_and_the_correct_module_keeps_its_points(tmp_path, trick, zygote):
    exercise = ATTACKED[trick]
    sub = solutions_copy(tmp_path / "sub")
    shutil.copy(INTEGRITY / f"{trick}.py", sub / f"{exercise}.py")
    card = _grade(sub, [exercise, "masks"], zygote)
    by_id = {e["id"]: e for e in card["exercises"]}
    assert by_id[exercise]["score"] == 0 and by_id[exercise]["withheld"].startswith("integrity finding: ")
    assert all(t["points"] == 0 for t in by_id[exercise]["tests"])
    assert by_id["masks"]["score"] == by_id["masks"]["max_score"] > 0 and "withheld" not in by_id["masks"]
    assert card["score"] == by_id["masks"]["score"]
    assert card["integrity"] and {f["file"] for f in card["integrity"]} == {f"{exercise}.py"}


@needs_memory_cgroup
@pytest.mark.slow
def test_the_outside_memory_figure_fails_a_full_matrix_hidden_from_the_dispatch_mode(tmp_path, zygote):
    """Even without the scan's verdict, the memory test itself fails: the cgroup saw the L x S matrix."""
    sub = solutions_copy(tmp_path / "sub")
    shutil.copy(INTEGRITY / "disables_dispatch_mode.py", sub / "efficient_attention.py")
    card = _grade(sub, ["efficient_attention"], zygote)
    (test,) = [t for e in card["exercises"] for t in e["tests"] if t["name"] == MEMORY_TEST]
    assert test["outcome"] == "failed" and "the sandbox's memory grew by" in test["message"], test
    honest = _grade(solutions_copy(tmp_path / "honest"), ["efficient_attention"], zygote)
    (test,) = [t for e in honest["exercises"] for t in e["tests"] if t["name"] == MEMORY_TEST]
    assert test["outcome"] == "passed", test["message"]


@needs_memory_cgroup
@pytest.mark.slow
def test_outside_figure_noise_full_build_and_tiles(tmp_path, zygote):
    """Baseline noise of the cgroup figure, a full 4096 x 4096 build and a tiled one, in one worker."""
    sub = solutions_copy(tmp_path / "sub")
    shutil.copy(CORPUS / "buggy" / "efficient_attention" / "flash_full_score_matrix.py", sub / "full.py")
    a = manifest.load()
    backend = SandboxBackend(sub, isolation.LaunchSpec("namespace", slot=3), bans=a.bans(), time_limits={},
                             budget_s=300, starter=ZygoteStarter(zygote, 3) if zygote else None)
    try:
        backend.begin_test("noise", "efficient_attention")
        x = torch.randn(4, 8)
        noise = [backend.measure("softmax", "softmax_stable", (x,), {})[1]["max_memory_bytes"] for _ in range(10)]
        q, k, v = (torch.randn(1, 1, 4096, 16) for _ in range(3))
        tiled = backend.measure("efficient_attention", "flash_attention", (q, k, v), {"block_size": 64})[1]
        full = backend.measure("full", "flash_attention", (q, k, v), {"block_size": 64})[1]
    finally:
        backend.close()
    assert max(noise[1:]) < 2 * MiB and max(noise) < 8 * MiB, noise  # the first call pays one-off costs
    assert tiled["max_memory_bytes"] < 24 * MiB, tiled  # the hidden test's bound is 32 MiB; seen: 10-16 MiB
    assert full["max_memory_bytes"] > 64 * MiB, full  # the 64 MiB matrix (and its softmax) were charged


def test_memwatch_reads_v1_and_v2_files_and_gives_up_without_a_group(tmp_path):
    v1 = tmp_path / "v1"
    v1.mkdir()
    (v1 / "memory.usage_in_bytes").write_text("1000\n")
    (v1 / "memory.max_usage_in_bytes").write_text("99999\n")
    watch = memwatch.start(v1)
    assert watch is not None and (v1 / "memory.max_usage_in_bytes").read_text() == "0"  # the peak was reset
    (v1 / "memory.max_usage_in_bytes").write_text("7000\n")
    assert watch.delta() == 6000
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "memory.current").write_text("500\n")
    (v2 / "memory.peak").write_text("")
    watch = memwatch.start(v2)
    assert watch is not None
    fd = os.open(v2 / "memory.peak", os.O_WRONLY)
    os.pwrite(fd, b"2500\n", 0)
    os.close(fd)
    assert watch.delta() == 2000
    assert memwatch.start(None) is None and memwatch.start(tmp_path / "absent") is None
    assert memwatch.source([str(v1)]) == "in-process" and memwatch.source([str(v2)]) == "cgroup"
