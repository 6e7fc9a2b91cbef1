"""What a killed grader run leaves (temporary folders holding student code, cgroups with processes)
is removed when the next run starts; what a live run owns is never touched."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from grader.sandbox import sweep


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _aged(path: Path) -> Path:
    old = time.time() - 3600
    os.utime(path, (old, old))
    return path


def test_folders_of_dead_runs_go_and_live_ones_stay(tmp_path, monkeypatch):
    monkeypatch.setattr(sweep.tempfile, "gettempdir", lambda: str(tmp_path))
    dead = tmp_path / f"grader-submission-{_dead_pid()}-abc"
    dead.mkdir()
    (dead / "softmax.py").write_text("student code")
    _aged(dead)
    live = tmp_path / f"grader-root-{os.getpid()}-def"
    live.mkdir()
    _aged(live)
    young = tmp_path / f"grader-warm-{_dead_pid()}-ghi"
    young.mkdir()  # a run that is still starting up: too young to judge
    other = tmp_path / "grader-notours"
    other.mkdir()
    _aged(other)
    assert sweep.sweep()["folders"] == 1
    assert not dead.exists() and live.exists() and young.exists() and other.exists()


@pytest.mark.skipif(
    not (sweep.CGROUP_ROOTS[1].parent.is_dir() and os.geteuid() == 0),
    reason="needs v1 pids cgroup as root",
)
def test_cgroups_of_dead_runs_are_emptied_and_removed():
    group = sweep.CGROUP_ROOTS[1] / f"p{_dead_pid()}-slot-9"
    group.mkdir(parents=True)
    parked = subprocess.Popen(["sleep", "600"])
    (group / "cgroup.procs").write_text(str(parked.pid))
    mine = sweep.CGROUP_ROOTS[1] / f"p{os.getpid()}-slot-9"
    mine.mkdir(exist_ok=True)
    try:
        assert sweep.sweep()["cgroups"] >= 1
        assert parked.wait(timeout=10) == -9  # the leftover sandbox process was killed
        assert not group.exists() and mine.exists()
    finally:
        parked.kill()
        mine.rmdir()


@pytest.mark.skipif(
    not (sweep.CGROUP_ROOTS[1].parent.is_dir() and os.geteuid() == 0),
    reason="needs v1 cgroups as root",
)
def test_a_grade_leaves_no_cgroup_and_no_temporary_folder_behind(tmp_path):
    from grader.grade import grade
    from tests.project.support.common import ROOT

    def ours() -> list[Path]:
        return [g for root in sweep.CGROUP_ROOTS for g in root.glob(f"p{os.getpid()}-*")]

    def folders() -> set[Path]:
        return set(Path(sweep.tempfile.gettempdir()).glob(f"grader-*-{os.getpid()}-*"))

    before, groups_before = (
        folders(),
        set(ours()),
    )  # earlier tests in this process may have made some
    card = grade(
        ROOT / "examples" / "submissions" / "frank.py", isolation="namespace", exercises=["softmax"]
    )
    assert card["status"] == "graded" and card["isolation"]["cgroup"] == "v1"
    assert set(ours()) <= groups_before and folders() == before
