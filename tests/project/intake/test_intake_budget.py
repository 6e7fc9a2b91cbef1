"""Nothing a student submits becomes a grader fault or costs the trusted process (issue 26, section 3).

- One size budget (``intake_fs.MAX_SUBMISSION_BYTES``, half the sandbox's ``/box``, counted in pages as
  tmpfs counts them), checked at intake: 180 helper modules of 1 MiB each passed intake's caps and then
  overflowed the 64 MiB ``/box`` at sandbox set-up, so every grade of that submission was a ``grader``
  error ("rerun") instead of a score.
- A notebook is read by a child with CPU and memory limits, and its code cells' size is checked before
  any parse: a 6 MiB literal took the trusted process to 3 GB (3,010 MiB measured here before; now the
  trusted process stays at its own size, about 20 MiB), and a 400 KiB f-string of fields took it 25 s of CPU.
- Only what does not depend on the submission is the grader's: a reader that cannot start is a
  ``grader`` error card, never an intake error charged to the student.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from grader.grade import grade
from grader.intake import bounded
from grader.intake import submission as intake
from grader.safefs import MAX_SUBMISSION_BYTES, PAGE_BYTES
from grader.sandbox import choice
from tests.project.support.common import ROOT, solutions_copy

pytestmark = pytest.mark.cost(20)  # seconds on 2 cores: the bombs' reader runs into its CPU limit

MIB = 1 << 20


def _pages(n: int) -> int:
    return -(-n // PAGE_BYTES) * PAGE_BYTES


def _fill(folder: Path, total: int) -> Path:
    """The reference solutions plus helper modules (a comment line each) so that the staged modules take
    exactly ``total`` bytes of tmpfs pages."""
    solutions_copy(folder)
    left = total - sum(_pages(p.stat().st_size) for p in folder.glob("*.py"))
    n = 0
    while left > 0:
        size = min(MIB, left)
        (folder / f"helper_{n:03d}.py").write_text("#" * (size - 1) + "\n")
        left, n = left - size, n + 1
    return folder


def test_a_submission_larger_than_the_sandbox_box_is_an_intake_error_it_owns(tmp_path):
    sub = solutions_copy(tmp_path / "mallory")
    for n in range(180):  # each within intake's per-file cap
        (sub / f"helper_{n:03d}.py").write_text("#" * (MIB - 1) + "\n")
    card = grade(sub, exercises=["softmax"], seed=1)
    assert card["status"] == "error" and card["error"]["kind"] == "intake", card["error"]
    assert f"more than {MAX_SUBMISSION_BYTES >> 20} MiB" in card["error"]["message"]


def test_the_budget_is_counted_in_pages_up_to_the_last_byte(tmp_path):
    at = _fill(tmp_path / "at", MAX_SUBMISSION_BYTES)
    sub = intake.take(at, modules={"softmax"})
    sub.cleanup()
    (at / "one_more.py").write_text("\n")  # one more byte is one more page
    with pytest.raises(intake.IntakeError, match="more than the sandbox can hold"):
        intake.take(at, modules={"softmax"})


@pytest.mark.skipif(
    "namespace" not in choice.available(), reason="needs the namespace sandbox (root on Linux)"
)
def test_the_largest_submission_intake_admits_is_graded_in_the_namespace_sandbox(tmp_path):
    """The budget holds for the /box the launcher mounts: what intake admits is copied in and graded."""
    card = grade(
        _fill(tmp_path / "big", MAX_SUBMISSION_BYTES),
        exercises=["softmax"],
        isolation="namespace",
        seed=1,
    )
    assert (card["status"], card["score"]) == ("graded", 6), card.get("error")


_TRUSTED = r"""
import json, resource, sys, time
from grader.intake import submission as intake
t0 = resource.getrusage(resource.RUSAGE_SELF)
try:
    intake.take(sys.argv[1], modules={"softmax"}).cleanup()
    error = None
except intake.IntakeError as exc:
    error = str(exc)
me = resource.getrusage(resource.RUSAGE_SELF)
peak = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))  # this process's own peak
print(json.dumps({"error": error, "rss_mib": int(peak.split()[1]) / 1024,  # (ru_maxrss is inherited across exec)
                  "cpu_s": me.ru_utime + me.ru_stime - t0.ru_utime - t0.ru_stime}))
"""


def _trusted(path: Path) -> dict:
    """Intake of ``path`` in a fresh process (the trusted side, measured): its error, peak RSS and CPU time
    (its own: not the reader child's)."""
    done = subprocess.run(
        [sys.executable, "-c", _TRUSTED, str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def _notebook(path: Path, source: str) -> Path:
    path.write_text(
        json.dumps(
            {
                "nbformat": 4,
                "metadata": {},
                "cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "source": source}],
            }
        )
    )
    return path


def test_a_6_mib_literal_is_refused_before_it_is_parsed_and_costs_the_trusted_process_nothing(
    tmp_path,
):
    got = _trusted(_notebook(tmp_path / "bomb.ipynb", "TABLE = [" + "1," * (3 * MIB) + "]\n"))
    assert got["rss_mib"] < 150, got  # before: 3,010 MiB in the trusted process
    assert got["error"] and "code cells hold more than 1024 KiB" in got["error"]


def test_a_notebook_that_takes_long_to_parse_is_stopped_by_the_readers_cpu_limit(tmp_path):
    """Python 3.11 parses an f-string's fields in quadratic time: 400 KiB of them took 25 s (the trusted
    process's CPU, before); the reader stops at its CPU limit and the notebook is the student's to fix."""
    got = _trusted(
        _notebook(tmp_path / "slow.ipynb", "S = f'" + "{a}" * ((400 << 10) // 3) + "'\n")
    )
    assert got["error"] and f"more than {bounded.CPU_S} s of CPU" in got["error"], got
    assert got["cpu_s"] < 2, got


def test_a_reader_that_cannot_start_is_a_grader_error_never_the_students(tmp_path, monkeypatch):
    nb = _notebook(tmp_path / "softmax.ipynb", (ROOT / "solutions" / "softmax.py").read_text())
    monkeypatch.setattr(
        bounded.procs, "module_argv", lambda *a, **k: [str(tmp_path / "no-such-python")]
    )
    card = grade(nb, exercises=["softmax"], isolation="process", seed=1)
    assert card["status"] == "error" and card["error"]["kind"] == "grader", card["error"]
    assert "could not start" in card["error"]["message"]
    monkeypatch.setattr(
        bounded.procs, "module_argv", lambda *a, **k: [sys.executable, "-c", "print('?')"]
    )
    with pytest.raises(bounded.GraderFault, match="reader failed"):
        intake.take(nb, modules={"softmax"})
