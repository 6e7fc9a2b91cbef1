"""The hostile class's leftover probe finds a real leftover and spares a concurrent grader's live worker.

The probe decides whether a daemon outlived the batch; a probe that finds nothing would pass every hostile
class. Here a stand-in daemon (a sleeping process under a sandbox uid) is started twice: once with its
sandbox's scratch folder removed (what a surviving daemon looks like), once with it still there (what another
grader's running worker under a reused lease looks like).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.project.support.hostile_class import leftover_sandbox_processes

UID = 64999  # the top of the lease range: a uid no grader run here hands out before the others
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="starting a process under another uid needs root"
)


def _started(tmpdir: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        ["sleep", "120"],
        env={"TMPDIR": str(tmpdir), "PATH": "/usr/bin:/bin"},
        user=UID,
        group=UID,
        start_new_session=True,
    )


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    proc = _started(scratch)
    time.sleep(
        2.1
    )  # ps gives whole seconds: the probe counts what started a second before its mark
    yield proc, scratch
    proc.kill()
    proc.wait()


def test_a_process_whose_sandbox_is_gone_is_a_leftover(
    daemon: tuple[subprocess.Popen[bytes], Path],
) -> None:
    proc, scratch = daemon
    scratch.rmdir()
    found = leftover_sandbox_processes({UID}, started_before=time.time(), wait_s=0)
    assert [line for line in found if int(line.split()[1]) == proc.pid], found
    assert "TMPDIR" in found[0] and "is gone" in found[0]


def test_a_live_sandbox_s_worker_under_a_reused_uid_is_not(
    daemon: tuple[subprocess.Popen[bytes], Path],
) -> None:
    proc, _scratch = daemon
    assert proc.poll() is None
    assert leftover_sandbox_processes({UID}, started_before=time.time(), wait_s=0) == []


def test_a_process_started_after_the_mark_is_not_counted(tmp_path: Path) -> None:
    mark = time.time()
    time.sleep(1.1)
    proc = _started(tmp_path / "never-made")
    try:
        assert leftover_sandbox_processes({UID}, started_before=mark, wait_s=0) == []
    finally:
        proc.kill()
        proc.wait()
