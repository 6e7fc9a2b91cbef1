"""Ctrl-C (a real SIGINT to a `grader batch` process) keeps every finished scorecard intact and valid,
leaves no grading process behind, and a rerun resumes where it stopped."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from grader import schema
from grader.batch.results import uninterrupted
from tests.project.support.common import ROOT

pytestmark = pytest.mark.cost(14)  # seconds on 2 cores: started early (tests/project/conftest.py)

N = 24
ARGS = ["--exercise", "softmax", "--per-test-time-limit", "8", "-j", "1", "--quiet"]


def _tagged_processes(tag: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if f"GRADER_TEST_TAG={tag}".encode() in (proc / "environ").read_bytes():
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_sigint_keeps_finished_scorecards_and_a_rerun_resumes(tmp_path):
    klass, out = tmp_path / "class", tmp_path / "out"
    # 24 submissions: the interrupt must land while work is left, even when a loaded machine wakes this
    # test's polling loop late (with 8 the batch once finished before the signal was sent)
    for n in range(N):
        (klass / f"s{n}").mkdir(parents=True)
        shutil.copy(ROOT / "solutions" / "softmax.py", klass / f"s{n}" / "softmax.py")
    tag = uuid.uuid4().hex
    env = {**os.environ, "GRADER_TEST_TAG": tag}
    cmd = [sys.executable, "-m", "grader", "batch", str(klass), "--out", str(out), *ARGS]
    # SIGINT back to its default in the child: a run started in the background by a non-interactive shell
    # (`.ci/run &`) inherits SIGINT ignored, and Python then keeps ignoring it, as a background job should
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=_default_sigint,
    )
    cards = out / "scorecards"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list(cards.glob("*.json"))) < 2:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "rerun the same command to resume" in err
    finished = sorted(cards.glob("*.json"))
    assert 2 <= len(finished) < N
    for path in finished:
        schema.validate("scorecard", json.loads(path.read_text()))
    assert [
        p.name for p in cards.iterdir() if p.name.startswith(".")
    ] == []  # no half-written temp files
    deadline = (
        time.monotonic() + 60
    )  # the slots end on their own (SIGINT, then PDEATHSIG): wait for that, not a time
    while _tagged_processes(tag) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _tagged_processes(tag) == []  # no slot is left (their workers die with them: PDEATHSIG)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("unchanged, kept") == len(finished)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["graded"] == N and summary["counts"]["skipped"] == len(finished)


def test_a_result_in_hand_is_written_and_recorded_before_an_interrupt_lands(tmp_path):
    """SIGTERM arriving while a card is written and recorded (the cluster's log line) is held back until both
    are done, then stops the run as before: never a card without its record, or a record without its card
    (a resumed cluster run graded one submission twice when SIGTERM fell between them, CI beside a hog)."""

    def stop(signum: object, frame: object) -> None:
        raise KeyboardInterrupt

    steps: list[str] = []
    before = signal.signal(signal.SIGTERM, stop)
    idle = threading.Event()  # a second thread, as Dask's: the kernel may hand it the signal
    other = threading.Thread(target=idle.wait, daemon=True)
    other.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            with uninterrupted():
                steps.append("card")
                os.kill(
                    os.getpid(), signal.SIGTERM
                )  # pending, not delivered: the record still comes
                (tmp_path / "log").write_text("recorded")
                steps.append("record")
            steps.append("after")  # never reached: the held-back SIGTERM lands on leaving the block
    finally:
        signal.signal(signal.SIGTERM, before)
        idle.set()
    assert steps == ["card", "record"] and (tmp_path / "log").read_text() == "recorded"


def test_a_second_interrupt_is_not_held_back():
    """Whoever presses Ctrl-C twice means it: a card write that hangs must not make the run unstoppable."""
    steps: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        with uninterrupted():
            os.kill(os.getpid(), signal.SIGINT)
            steps.append("held")
            os.kill(os.getpid(), signal.SIGINT)
            steps.append("never")
    assert steps == ["held"]
