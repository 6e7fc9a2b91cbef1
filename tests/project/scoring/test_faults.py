"""Faults that are never the student's, and time limits that hold on a busy machine.

- a worker that cannot start is retried on a fresh one, then ends the grade as a *grader* error
  (``status: error``, kind ``grader``: a batch rerun grades it again), never as a student failure;
- per-test limits count the sandbox's CPU seconds, so a starved but correct call passes; a call
  that sleeps is still stopped by the wall-clock backstop;
- a timeout is retried once on a fresh worker (the test's earlier requests replayed) before it counts;
- hostile modules (fork bomb, memory bomb) never cost the next, correct exercise a point, even on
  a loaded machine (test_bombs.py, a module of its own so that xdist runs it beside these).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from grader import schema
from grader.grade import grade
from grader.protocol import errors
from grader.sandbox import channel as channel_module
from grader.sandbox import choice, cputime, isolation, leftovers, remote, session
from tests.project.support import loaded
from tests.project.support.common import solutions_copy

pytestmark = pytest.mark.cost(22)  # seconds on 2 cores: started early (tests/project/conftest.py)

BEST = choice.available()[0]


@pytest.fixture
def quick_restarts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session, "START_BACKOFF_S", 0.05)


def _break_starts(monkeypatch: pytest.MonkeyPatch, failing: int) -> list[int]:
    """Make the first ``failing`` worker launches fail before the worker is ready (a missing interpreter)."""
    calls: list[int] = []
    original = channel_module.Channel._config

    def config(self: channel_module.Channel, resp_w: int, status_w: int | None) -> dict:
        cfg = original(self, resp_w, status_w)
        calls.append(1)
        if len(calls) <= failing:
            cfg["python"] = "/nonexistent/python3"
        return cfg

    monkeypatch.setattr(channel_module.Channel, "_config", config)
    return calls


def test_a_worker_that_never_starts_is_a_grader_error_not_a_student_failure(
    tmp_path, monkeypatch, quick_restarts
):
    calls = _break_starts(monkeypatch, failing=100)
    card = grade(
        solutions_copy(tmp_path / "sub"),
        isolation="process",
        seed=1,
        exercises=["masks"],
        per_test_time_limit=10,
    )
    schema.validate("scorecard", card)
    assert card["status"] == "error" and card["error"]["kind"] == "grader", card["error"]
    assert "could not start" in card["error"]["message"] and card["score"] == 0
    assert len(calls) == session.START_ATTEMPTS  # retried, then given up once for the whole grade


def test_a_start_that_fails_once_is_retried_and_costs_nothing(
    tmp_path, monkeypatch, quick_restarts
):
    _break_starts(monkeypatch, failing=1)
    card = grade(
        solutions_copy(tmp_path / "sub"),
        isolation="process",
        seed=1,
        exercises=["masks"],
        per_test_time_limit=10,
    )
    assert card["status"] == "graded" and card["score"] == card["max_score"] == 8
    assert card["isolation"]["worker_starts"] == 2


def _backend(box: Path, backend: str, limit: float) -> remote.SandboxBackend:
    made = remote.SandboxBackend(
        box, isolation.LaunchSpec(backend), bans={}, time_limits={"ex": limit}, budget_s=300
    )
    made.begin_test("t::test", "ex")
    return made


BURN = '''
import os, time
from torch import nn


def burn(seconds):
    """Use `seconds` of this process's CPU time, however long that takes on the wall clock."""
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass
    return seconds


def sleep(seconds):
    time.sleep(seconds)


class HangsOnce(nn.Module):
    """Hangs (asleep: the wall-clock backstop, which is retried) the first time it runs in a box (a marker file
    remembers), then answers at once."""

    def forward(self, x):
        if not os.path.exists("hung-once"):
            open("hung-once", "w").close()
            time.sleep(1000)
        return x + 1
'''


@pytest.fixture
def burner(tmp_path: Path) -> Path:
    (tmp_path / "mod.py").write_text(textwrap.dedent(BURN))
    return tmp_path


@pytest.fixture
def quarter_cpu() -> Iterator[None]:
    """This process and every worker it starts get a quarter of one CPU (:func:`loaded.cpu_share`)."""
    with loaded.cpu_share(0.25):
        yield


def test_a_correct_call_starved_of_cpu_does_not_time_out(burner, quarter_cpu):
    """1.2 s of CPU under a 2 s limit takes ~5 s of wall time here: a 2 s wall-clock limit would stop it."""
    backend = _backend(burner, BEST, limit=2.0)
    try:
        backend.call(
            "mod", "burn", (0.0,), {}
        )  # the worker is up; its start is not the call's time
        t0 = time.monotonic()
        assert backend.call("mod", "burn", (1.2,), {}) == 1.2
        assert time.monotonic() - t0 > 2.0, (
            "the machine was not loaded enough to tell CPU from wall time"
        )
        assert backend.incidents == []
    finally:
        backend.close()


def test_a_call_that_burns_cpu_past_its_limit_times_out(burner):
    backend = _backend(burner, BEST, limit=1.0)
    try:
        t0 = time.monotonic()
        with pytest.raises(errors.StudentTimeout, match="1 s of CPU time"):
            backend.call("mod", "burn", (60.0,), {})
        assert time.monotonic() - t0 < 30
        # a CPU-time timeout is never retried (CPU time does not grow with load); only where the machine was too
        # busy for the call to reach its CPU limit first, the wall-clock backstop fired, and that one is retried
        assert [i["kind"] for i in backend.incidents] in (["timeout"], ["timeout", "timeout"])
        assert all(
            "wall-clock" in i["message"]
            for i in backend.incidents
            if "retried once" in i["message"]
        )
        assert backend.timeouts == {"ex": 1}
    finally:
        backend.close()


def test_a_sleeping_call_is_stopped_by_the_wall_clock_backstop(burner, monkeypatch):
    monkeypatch.setattr(session, "WALL_SLACK_S", 0.5)
    backend = _backend(burner, BEST, limit=0.5)  # asleep 2 s: stopped, retried once, stopped again
    try:
        t0 = time.monotonic()
        with pytest.raises(
            errors.StudentTimeout, match="wall-clock time, using no CPU time meanwhile"
        ):
            backend.call("mod", "sleep", (1000,), {})
        assert (
            time.monotonic() - t0 < 300
        )  # two idle backstops of 2 s and a restart, however busy: not 1000 s
    finally:
        backend.close()


def test_a_timeout_is_retried_once_on_a_fresh_worker_with_the_tests_handles_replayed(
    burner, monkeypatch
):
    """The module hangs once: a marker file in the box it shares with its retry (a `none` worker, whose leased uid
    may write this box, in a folder any uid may enter: ``process`` and ``namespace`` give it only a scratch
    folder that goes with it; and with the sweep of what a sandbox left in /tmp switched off: the retry is tested)."""
    monkeypatch.setattr(session, "WALL_SLACK_S", 0.5)
    monkeypatch.setattr(leftovers, "SHARED", ())
    box = Path(tempfile.mkdtemp(prefix="grader-test-box-"))
    box.chmod(0o777)
    shutil.copy(burner / "mod.py", box / "mod.py")
    backend = _backend(box, "none", limit=1.0)
    try:
        handle = backend.call("mod", "HangsOnce", (), {})
        out = backend.method(handle.id, "forward", (torch.zeros(2),), {})
        assert torch.equal(out, torch.ones(2))
        assert [i["kind"] for i in backend.incidents] == ["timeout"]
        assert "retried once" in backend.incidents[0]["message"] and backend.timeouts == {}
        assert backend.starts == 2
        backend.release(handle.id)
    finally:
        backend.close()
        shutil.rmtree(box, ignore_errors=True)


def test_cpu_time_without_cpuacct_counts_the_whole_process_tree():
    """The /proc fallback: a child's CPU counts while it runs and, once reaped, through its parent (read once the
    parent says it reaped the child: the thing itself, however long a busy machine makes it take)."""
    code = (
        "import os, sys, time\nif os.fork() == 0:\n    t = time.process_time()\n"
        "    while time.process_time() - t < 0.8:\n        pass\n    os._exit(0)\nos.wait()\n"
        "print('reaped', flush=True)\ntime.sleep(60)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        meter = cputime.CpuMeter(proc.pid, None)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "reaped"
        assert (
            0.78 <= meter.seconds() < 3
        )  # clock ticks of 10 ms: /proc may round the child's 0.8 s down
    finally:
        proc.kill()
        proc.wait()
