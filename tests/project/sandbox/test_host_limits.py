"""What holds a sandbox from outside on any machine: cgroup v1 or v2 groups per slot, and the memory rlimit that
CUDA tolerates (RLIMIT_DATA where a GPU is exposed, RLIMIT_AS otherwise).

The cgroup layouts are checked against fake hierarchies (this machine has v1 only; the v2 path ran for real on
an H100 host, see benchmarks/cuda_checks.sh); the rlimits are checked for real in child processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from grader.sandbox import cgroups, cputime, sweep
from grader.sandbox.isolation import LIB_ROOT


def _v2_root(
    tmp_path: Path, controllers: str = "cpuset cpu io memory hugetlb pids", enabled: str = ""
) -> Path:
    (tmp_path / "cgroup.controllers").write_text(controllers + "\n")
    (tmp_path / "cgroup.subtree_control").write_text(enabled + "\n")
    return tmp_path


def _mkdir_with_control_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """A real cgroup directory comes with its control files; a fake one gets the ones the code reads."""
    real_mkdir = Path.mkdir

    def mkdir(self: Path, *args: object, **kwargs: object) -> None:
        new = not self.exists()
        real_mkdir(self, *args, **kwargs)  # type: ignore[arg-type]
        if new and (self.parent / "cgroup.controllers").exists():
            (self / "cgroup.controllers").write_text("memory pids\n")
            (self / "cgroup.subtree_control").write_text("\n")
            (self / "memory.swap.max").write_text("max\n")

    monkeypatch.setattr(Path, "mkdir", mkdir)


def test_v2_one_group_per_slot_with_memory_pids_and_no_swap(tmp_path, monkeypatch):
    root = _v2_root(tmp_path)
    monkeypatch.setattr(cgroups, "ROOT", root)
    _mkdir_with_control_files(monkeypatch)
    assert cgroups.unified()
    groups = cgroups.slot_groups(3, memory_mb=1024, processes=64)
    group = root / "attention-grader" / f"p{__import__('os').getpid()}-slot-3"
    assert groups == [str(group)]
    assert (group / "memory.max").read_text() == str((1024 + cgroups.HEADROOM_MB) << 20)
    assert (group / "pids.max").read_text() == "64" and (
        group / "memory.swap.max"
    ).read_text() == "0"
    # the controllers are handed down: the root's children may use them, and so the parent's
    assert (root / "cgroup.subtree_control").read_text() == "+memory +pids"
    assert (root / "attention-grader" / "cgroup.subtree_control").read_text() == "+memory +pids"


def test_v2_without_the_memory_controller_makes_no_group(tmp_path, monkeypatch):
    monkeypatch.setattr(cgroups, "ROOT", _v2_root(tmp_path, controllers="cpu io pids"))
    assert cgroups.slot_groups(1, memory_mb=512, processes=8) == []


def test_v2_where_delegation_is_refused_makes_no_group(tmp_path, monkeypatch):
    root = _v2_root(tmp_path)
    monkeypatch.setattr(cgroups, "ROOT", root)
    monkeypatch.setattr(Path, "write_text", _refuse_subtree_control(Path.write_text))
    assert cgroups.slot_groups(1, memory_mb=512, processes=8) == []


def _refuse_subtree_control(real):  # type: ignore[no-untyped-def]
    def write_text(self: Path, data: str, *args: object, **kwargs: object) -> int:
        if self.name == "cgroup.subtree_control":
            raise PermissionError(
                13, "Permission denied", str(self)
            )  # a container without delegation
        return int(real(self, data, *args, **kwargs))

    return write_text


def test_v1_a_group_per_controller(tmp_path, monkeypatch):
    for controller in ("memory", "pids"):
        (tmp_path / controller).mkdir()
    monkeypatch.setattr(cgroups, "ROOT", tmp_path)
    assert not cgroups.unified()
    groups = [Path(g) for g in cgroups.slot_groups(2, memory_mb=2048, processes=32)]
    assert [g.parent.parent.name for g in groups] == ["memory", "pids"]
    assert (groups[0] / "memory.limit_in_bytes").read_text() == str(
        (2048 + cgroups.HEADROOM_MB) << 20
    )
    assert (groups[1] / "pids.max").read_text() == "32"


def test_cpu_time_of_a_v2_group_comes_from_cpu_stat(tmp_path):
    (tmp_path / "cpu.stat").write_text(
        "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n"
    )
    assert cgroups.cpu_group([str(tmp_path)]) == str(tmp_path)
    assert cputime.CpuMeter(1, str(tmp_path)).seconds() == pytest.approx(2.5)


def test_the_sweep_looks_in_the_v2_parent_too():
    assert cgroups.ROOT / cgroups.PARENT in sweep.CGROUP_ROOTS


_BOMB = """
import json, resource, sys
sys.path.insert(0, sys.argv[1])
from grader.sandbox import launcher
limits = {"cpu_s": 30, "memory_mb": 256, "file_size_mb": 8, "processes": 4096}
launcher.set_limits(limits, address_space=sys.argv[2] == "as")
try:
    block = bytearray(512 << 20)  # twice the cap, private and anonymous: torch's CPU tensors are such memory
    stopped = False
except MemoryError:
    stopped = True
print(json.dumps({"stopped": stopped, "as": resource.getrlimit(resource.RLIMIT_AS)[0],
                  "data": resource.getrlimit(resource.RLIMIT_DATA)[0]}))
"""


@pytest.mark.parametrize("mode", ["as", "data"])
def test_the_memory_rlimit_stops_an_allocation_over_the_cap_with_or_without_a_gpu(mode):
    """Without a GPU RLIMIT_AS holds memory; with one (CUDA fails under RLIMIT_AS) RLIMIT_DATA does, and
    RLIMIT_AS stays unlimited (CUDA started under RLIMIT_DATA of 4 and 16 GiB on an H100)."""
    out = subprocess.run(
        [sys.executable, "-c", _BOMB, str(LIB_ROOT), mode],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    got = json.loads(out.stdout)
    assert got["stopped"], got
    cap = 256 << 20
    assert (got["as"], got["data"]) == ((cap, -1) if mode == "as" else (-1, cap)), got
