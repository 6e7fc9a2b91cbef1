"""What the commands say to a person, on a terminal and off it (issues 28.7 and 28.9).

- ``grader grade`` without ``--out`` prints a human summary (the scorecard as JSON only with ``--json``), gives
  the reason for a submission it cannot read, and exits as ``grader batch`` does (1 for an error card).
- With their output going to a pipe (CI, a log file), ``grader grade`` and ``grader batch`` say that the canary is
  proving the grader before the tens of seconds it takes, and a batch says that its slots are starting: on
  4ad1d57 nothing was printed for 29-83 s. The line must arrive while the proof still runs (read from the pipe
  as it comes), not only at the end.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader import canary, gradetext, schema
from grader.batch.progress import Progress
from grader.errors import ExitCode
from tests.project.support.common import ROOT, small_course

pytestmark = pytest.mark.cost(40)

GRADER = [sys.executable, "-I", "-m", "grader"]
QUICK = ["--seed", "3", "--no-canary"]


def _grade(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*GRADER, "grade", *args], capture_output=True, text=True, cwd="/", timeout=600
    )


def test_grade_prints_a_summary_and_the_json_only_on_request(tmp_path, softmax_course):
    sub = tmp_path / "sub"
    sub.mkdir()
    shutil.copy(ROOT / "solutions" / "softmax.py", sub / "softmax.py")
    done = _grade(str(sub), *QUICK, "--manifest", str(softmax_course))
    assert done.returncode == ExitCode.OK, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("graded: 6/14 (") and "seed 3" in lines[0], done.stdout
    assert any(line.split()[:2] == ["softmax", "6/6"] for line in lines), done.stdout
    missing = next(line for line in lines if line.split()[:1] == ["simple_attention"])
    assert "0/8" in missing and "tests failing; first:" in missing and "not found" in missing, (
        missing
    )
    assert (
        not done.stdout.lstrip().startswith("{") and len(lines) < 10
    )  # on 4ad1d57: the JSON alone, 2,000 lines
    as_json = _grade(str(sub), *QUICK, "--manifest", str(softmax_course), "--json")
    card = json.loads(as_json.stdout)  # stdout is the scorecard alone; the summary went to stderr
    schema.validate("scorecard", card)
    assert card["score"] == 6 and any(
        x.startswith("graded: 6/14") for x in as_json.stderr.splitlines()
    )


def test_an_unreadable_submission_says_why_and_exits_1(tmp_path, softmax_course):
    bad = tmp_path / "alice.zip"
    bad.write_bytes(b"PK\x03\x04 truncated")
    done = _grade(str(bad), *QUICK, "--manifest", str(softmax_course))
    assert done.returncode == ExitCode.FAILED, done.stderr[
        -2000:
    ]  # 0 on 4ad1d57, with no reason printed
    first = done.stdout.splitlines()[0]
    assert first.startswith("error (intake): ") and "zip" in first, done.stdout
    assert "could not be read as given" in done.stdout


def test_the_summary_is_safe_text_and_names_withheld_and_capped_exercises():
    card = {
        "status": "graded",
        "score": 3,
        "max_score": 12,
        "seed": 1,
        "incidents": [{"kind": "timeout"}] * 2,
        "submission": {"path": "sub\x1b[2J"},
        "isolation": {"backend": "namespace", "attested": True},
        "exercises": [
            {
                "id": "softmax",
                "score": 3,
                "max_score": 6,
                "capped": "NaN",
                "tests": [
                    {
                        "name": "test_a",
                        "outcome": "failed",
                        "counted": True,
                        "message": "got nan\nforged: line",
                    }
                ],
            },
            {"id": "masks", "score": 0, "max_score": 6, "withheld": "uses gc", "tests": []},
        ],
    }
    text = "\n".join(gradetext.summary(card))
    assert "\x1b" not in text and "sub\\x1b[2J" in text and "forged" not in text
    assert (
        "capped at half" in text and "withheld: uses gc" in text and "incidents: 2 timeout" in text
    )


def _when_said(
    argv: list[str], env: dict[str, str], wanted: str, probe: Path
) -> tuple[bool, bool, str]:
    """Read the command's stderr (a pipe) line by line until ``wanted`` appears: (whether the command was still
    running then, whether ``probe`` existed then, everything it printed)."""
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/", env=env
    )
    seen, running, existed = "", False, True
    assert proc.stderr is not None
    for line in proc.stderr:
        seen += line
        if wanted in line:
            running, existed = proc.poll() is None, probe.exists()
            break
    _, err = proc.communicate(timeout=600)
    return running, existed, seen + err


@pytest.fixture
def softmax_course(tmp_path: Path) -> Path:
    """The course reduced to softmax and simple_attention (short grades, a short proof)."""
    return small_course(tmp_path / "course")


@pytest.fixture
def cold_cache(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, canary.CACHE_ENV: str(tmp_path / "cache"), "GRADER_KEEP_WARM": "5"}


def test_grade_off_a_terminal_says_the_canary_is_proving_while_it_runs(
    tmp_path, softmax_course, cold_cache
):
    sub = tmp_path / "sub"
    sub.mkdir()
    shutil.copy(ROOT / "solutions" / "softmax.py", sub / "softmax.py")
    card = tmp_path / "card.json"
    running, existed, said = _when_said(
        [*GRADER, "grade", str(sub), "--manifest", str(softmax_course), "--out", str(card)],
        cold_cache,
        "proving the grader first",
        card,
    )
    assert running and not existed, said[-2000:]  # said while the proof ran, before any result
    lines = said.splitlines()
    assert "reference solutions" in lines[0] and "stubs" in lines[0], said
    assert "canary: reference solutions 14/14, stubs 0/14 (proven in" in said and card.is_file(), (
        said[-2000:]
    )


def test_batch_off_a_terminal_says_what_it_is_doing_before_the_first_result(
    tmp_path, softmax_course, cold_cache
):
    klass = tmp_path / "class"
    (klass / "alice").mkdir(parents=True)
    shutil.copy(ROOT / "solutions" / "softmax.py", klass / "alice" / "softmax.py")
    argv = [
        *GRADER,
        "batch",
        str(klass),
        "--out",
        str(tmp_path / "out"),
        "--manifest",
        str(softmax_course),
        "-j",
        "1",
    ]
    card = tmp_path / "out" / "scorecards" / "alice.json"
    running, existed, said = _when_said(argv, cold_cache, "proving the grader first", card)
    assert running and not existed, said[-2000:]
    lines = said.splitlines()
    at = {
        key: next(i for i, x in enumerate(lines) if key in x)
        for key in (
            "proving the grader first",
            "canary: reference solutions 14/14, stubs 0/14",
            "starting 1 grading slot(s)",
            "[1/1] alice: 6/14",
        )
    }
    assert list(at.values()) == sorted(at.values()), said[-3000:]


def test_progress_says_a_line_on_a_terminal_too():
    stream = io.StringIO()
    with Progress(stream, rich=True) as progress:
        progress.say("proving the grader first: [bold]not markup[/bold]")
    assert "proving the grader first: [bold]not markup[/bold]" in stream.getvalue()
