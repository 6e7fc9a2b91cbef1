"""The memory figure read from the sandbox's cgroup (outside the worker): its noise, a full build and a tiled
one, in a cold worker and one forked from a zygote; and memwatch's reading of cgroup v1 and v2 files.

The red team's tricks themselves (each replaces its exercise's module in an otherwise correct submission) are
graded end to end with the whole hostile class, by both kinds of worker: test_hostile_class.py.
"""

from __future__ import annotations

import os
import shutil

import pytest
import torch

from grader.course import manifest
from grader.sandbox import choice, isolation, memwatch
from grader.sandbox.remote import SandboxBackend
from grader.sandbox.starters import ZygoteStarter
from tests.project.support.common import CORPUS, solutions_copy

pytestmark = pytest.mark.cost(6)  # seconds on 2 cores: started early (tests/project/conftest.py)

MiB = 1 << 20
needs_memory_cgroup = pytest.mark.skipif(
    "namespace" not in choice.available()
    or memwatch.source(isolation.LaunchSpec("namespace").cgroup_paths()) != "cgroup",
    reason="needs the namespace sandbox with a writable memory cgroup (root on Linux)",
)


def _with_full_build(tmp_path, zygote) -> SandboxBackend:
    """A sandboxed reference submission with a module ``full`` whose flash_attention builds the whole
    score matrix, in slot 3 (a cold worker, or one forked from ``zygote``)."""
    sub = solutions_copy(tmp_path / "sub")
    shutil.copy(
        CORPUS / "buggy" / "efficient_attention" / "flash_full_score_matrix.py", sub / "full.py"
    )
    return SandboxBackend(
        sub,
        isolation.LaunchSpec("namespace", slot=3),
        bans=manifest.load().bans(),
        time_limits={},
        budget_s=300,
        starter=ZygoteStarter(zygote, 3) if zygote else None,
    )


@needs_memory_cgroup
@pytest.mark.slow
def test_outside_figure_noise_full_build_and_tiles(tmp_path, zygote):
    """Baseline noise of the cgroup figure, a full 4096 x 4096 build and a tiled one, in one worker."""
    backend = _with_full_build(tmp_path, zygote)
    try:
        backend.begin_test("noise", "efficient_attention")
        x = torch.randn(4, 8)
        noise = [
            backend.measure("softmax", "softmax_stable", (x,), {})[1]["max_memory_bytes"]
            for _ in range(10)
        ]
        q, k, v = (torch.randn(1, 1, 4096, 16) for _ in range(3))
        tiled = backend.measure(
            "efficient_attention", "flash_attention", (q, k, v), {"block_size": 64}
        )[1]
        full = backend.measure("full", "flash_attention", (q, k, v), {"block_size": 64})[1]
    finally:
        backend.close()
    assert max(noise[1:]) < 2 * MiB and max(noise) < 8 * MiB, (
        noise
    )  # the first call pays one-off costs
    assert tiled["max_memory_bytes"] < 24 * MiB, (
        tiled
    )  # the hidden test's bound is 32 MiB; seen: 10-16 MiB
    assert full["max_memory_bytes"] > 64 * MiB, (
        full
    )  # the 64 MiB matrix (and its softmax) were charged


@needs_memory_cgroup
@pytest.mark.slow
def test_memory_freed_by_an_earlier_call_is_never_reused_unseen(tmp_path, zygote):
    """Each measured build follows an unmeasured one that freed the same 16 MiB score matrices: the
    measured one must be charged for them again. A worker that kept freed blocks in its heap
    (glibc's default) and measured without returning them first was charged 0.1-18 MiB."""
    backend = _with_full_build(tmp_path, zygote)
    qkv = tuple(torch.randn(1, 1, 2048, 16) for _ in range(3))  # scores 2048 x 2048: 16 MiB
    figures = []
    try:
        backend.begin_test("reuse", "efficient_attention")
        for _ in range(3):
            backend.call("full", "flash_attention", qkv, {"block_size": 64})
            _, stats = backend.measure("full", "flash_attention", qkv, {"block_size": 64})
            figures.append(stats["max_memory_bytes"] / MiB)
    finally:
        backend.close()
    assert min(figures) >= 32, figures  # its scores and their softmax; seen 48 MiB


def test_memwatch_reads_v1_and_v2_files_and_gives_up_without_a_group(tmp_path):
    v1 = tmp_path / "v1"
    v1.mkdir()
    (v1 / "memory.usage_in_bytes").write_text("1000\n")
    (v1 / "memory.max_usage_in_bytes").write_text("99999\n")
    watch = memwatch.start(v1)
    assert (
        watch is not None and (v1 / "memory.max_usage_in_bytes").read_text() == "0"
    )  # the peak was reset
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
