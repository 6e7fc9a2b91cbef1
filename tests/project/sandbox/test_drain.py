"""Waiting for a killed sandbox's processes to be gone (grader.sandbox.drain): the wait ends when a
process exits, not at the next tick of a clock; a process that has exited but is still listed (a zombie)
is looked at again after a pause, never in a busy loop; stragglers are killed after ``kill_after``.

The groups here are folders holding a ``cgroup.procs`` file, written by the test as the kernel would.
"""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest

from grader.sandbox import drain

pytestmark = pytest.mark.cost(2)


def _group(tmp_path: Path, *pids: int) -> Path:
    group = tmp_path / "group"
    group.mkdir(exist_ok=True)
    (group / "cgroup.procs").write_text("".join(f"{pid}\n" for pid in pids))
    return group


def test_the_wait_ends_when_a_process_exits_and_not_before():
    sleeper = subprocess.Popen(["sleep", "600"])
    try:
        assert drain._until_one_exits([sleeper.pid], 0.01) == set()  # alive: the timeout ends it
        threading.Timer(0.2, sleeper.kill).start()
        assert drain._until_one_exits([sleeper.pid], 300.0) == {sleeper.pid}  # its exit ends it
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_process_gone_before_the_look_is_no_wait():
    sleeper = subprocess.Popen(["sleep", "600"])
    sleeper.kill()
    sleeper.wait()  # reaped: its pid names nothing now
    assert drain._until_one_exits([sleeper.pid], 300.0) == set()


def test_drained_once_the_group_empties_after_its_last_process_exits(tmp_path):
    sleeper = subprocess.Popen(["sleep", "600"])
    group = _group(tmp_path, sleeper.pid)

    def the_kernel() -> None:  # the group lists the process until it has exited
        sleeper.wait()
        _group(tmp_path)

    watcher = threading.Thread(target=the_kernel)
    watcher.start()
    threading.Timer(0.2, sleeper.kill).start()
    try:
        assert drain.wait_drained([str(group)], timeout=300.0, kill_after=300.0)
    finally:
        sleeper.kill()
        watcher.join()


def test_an_exited_process_still_listed_is_not_a_busy_loop(tmp_path, monkeypatch):
    zombie = subprocess.Popen(["true"])
    zombie_pid = zombie.pid
    # exited, never reaped by us while the wait runs: its pidfd is readable at once, every time
    for _ in range(200):
        if Path(f"/proc/{zombie_pid}/stat").read_text().split(") ")[1].startswith("Z"):
            break
        threading.Event().wait(0.01)
    looks = []
    real = drain.members
    monkeypatch.setattr(drain, "members", lambda groups: looks.append(1) or real(groups))
    group = _group(tmp_path, zombie_pid)
    try:
        assert not drain.wait_drained([str(group)], timeout=0.3, kill_after=300.0)
    finally:
        zombie.wait()
    # a look, then a pause of POLL_S every other look: about 0.3 / 0.05 * 2 looks, never thousands
    assert len(looks) <= 2 * 0.3 / drain.POLL_S + 4, len(looks)
