"""The zygote that forks sandboxed workers with torch already imported (batch slots use it by default).

The isolation of forked workers is checked attack by attack in ``test_hostile_class.py`` (every attack runs
both cold and forked); here: the zygote's own life cycle and its fallbacks.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from grader import schema
from grader.grade import grade
from grader.options import GradeOptions
from grader.sandbox import choice, isolation
from grader.sandbox.starters import ZygoteStarter
from grader.sandbox.zygote_client import Zygote
from tests.project.support.common import ROOT, running, solutions_copy

pytestmark = pytest.mark.cost(12)  # seconds on 2 cores: started early (tests/project/conftest.py)

posix_only = pytest.mark.skipif(os.name != "posix", reason="the zygote forks: POSIX only")


def _grade(sub, zygote, backend="process"):
    card = grade(
        sub,
        options=GradeOptions(isolation=backend, seed=3, exercises=["softmax"]),
        starter=ZygoteStarter(zygote),
    )
    schema.validate("scorecard", card)
    return card


@posix_only
def test_zygote_is_single_threaded_and_every_worker_is_forked(tmp_path):
    zygote = Zygote()
    try:
        assert zygote.wait_ready()  # ready means torch imported, warmed up, and still one thread
        sub = solutions_copy(tmp_path / "sub")
        cards = [_grade(sub, zygote) for _ in range(3)]
    finally:
        zygote.close()
    for card in cards:
        assert card["score"] == card["max_score"] == 6
        assert card["isolation"]["worker_forks"] == card["isolation"]["worker_starts"] == 1


@posix_only
def test_malformed_launch_requests_are_ignored(tmp_path):
    """Requests without the five fds or without a JSON object fork nothing; the next good one works."""
    import socket

    zygote = Zygote()
    try:
        assert zygote.wait_ready()
        r, w = os.pipe()
        socket.send_fds(zygote.sock, [b"not json"], [r, w, r, w, w])
        socket.send_fds(zygote.sock, [b"{}"], [r])
        zygote.sock.send(b"[1, 2]")
        os.close(r)
        os.close(w)
        card = _grade(solutions_copy(tmp_path / "sub"), zygote)
        assert zygote.alive and card["score"] == 6 and card["isolation"]["worker_forks"] == 1
    finally:
        zygote.close()


@posix_only
def test_a_dead_zygote_falls_back_to_a_cold_worker(tmp_path):
    zygote = Zygote()
    assert zygote.wait_ready()
    os.kill(zygote.proc.pid, signal.SIGKILL)
    zygote.proc.wait()
    card = _grade(solutions_copy(tmp_path / "sub"), zygote)
    zygote.close()
    assert card["status"] == "graded" and card["score"] == 6
    assert card["isolation"]["worker_forks"] == 0 and card["isolation"]["worker_starts"] == 1


@posix_only
@pytest.mark.skipif(
    "namespace" not in choice.available(), reason="needs the namespace sandbox (root on Linux)"
)
def test_a_zygote_that_cannot_isolate_never_runs_the_worker_unisolated(tmp_path):
    """A set-up failure in the forked child (here: a missing cgroup folder) is a crash, not a free run."""
    zygote = Zygote()
    assert zygote.wait_ready()
    spec = isolation.LaunchSpec("namespace")
    real = spec.config

    def broken(*args, **kwargs):
        cfg = real(*args, **kwargs)
        cfg["cgroups"] = ["/nonexistent/cgroup"]
        return cfg

    from grader.sandbox.channel import Channel, ChannelError

    spec.config = broken  # type: ignore[method-assign]
    channel = Channel(spec, solutions_copy(tmp_path / "sub"), zygote)
    try:
        with pytest.raises(ChannelError) as info:
            channel.receive(10)
        assert info.value.kind == "crash"
        assert b"sandbox set-up failed" in bytes(channel.output["stderr"])
    finally:
        channel.kill()
        zygote.close()


@posix_only
def test_the_zygote_and_its_workers_die_with_their_slot(tmp_path):
    """PR_SET_PDEATHSIG all along the chain: a slot killed by SIGKILL leaves no zygote (torch in memory)
    and no forked worker behind, even one whose submission would loop forever."""
    code = (
        "import sys, time; from pathlib import Path; from grader.sandbox.zygote_client import Zygote; "
        "from grader.sandbox.channel import Channel; from grader.sandbox.isolation import LaunchSpec; "
        "z = Zygote(); assert z.wait_ready(); "
        f"c = Channel(LaunchSpec('process'), Path({str(tmp_path)!r}), z); r = c.receive(30); "
        "print(z.proc.pid, c.proc.pid, r['pid'], flush=True); time.sleep(60)"
    )
    slot = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        pids = [int(p) for p in slot.stdout.readline().split()]
        assert len(pids) == 3 and all(running(p) for p in pids)  # zygote, proxy, worker
        slot.kill()
        slot.wait()
        deadline = time.monotonic() + 10
        while any(running(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(running(p) for p in pids), "the zygote or its worker outlived the slot"
    finally:
        slot.kill()
