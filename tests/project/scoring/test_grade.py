"""`grader grade` end to end: full marks for the reference, zero for the stubs, exit codes, refusals."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from grader import schema
from grader.cli.main import main
from grader.sandbox import choice, isolation
from tests.project.support.common import ROOT, solutions_copy

pytestmark = pytest.mark.cost(26)  # seconds on 2 cores: started early (tests/project/conftest.py)

STRONGEST = choice.available()[0]


def _grade_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "grader", "grade", *args],
        capture_output=True,
        text=True,
        cwd="/",
        timeout=600,
    )


def test_reference_gets_100_under_the_strongest_backend(tmp_path):
    out = tmp_path / "card.json"
    done = _grade_cli(str(ROOT / "solutions"), "--out", str(out), "--seed", "11")
    assert done.returncode == 0, done.stderr
    card = json.loads(out.read_text())
    schema.validate("scorecard", card)
    assert (card["status"], card["score"], card["max_score"]) == ("graded", 100, 100)
    assert card["isolation"]["backend"] == STRONGEST and card["seed"] == 11
    assert "100/100" in done.stderr


def test_stubs_get_zero_and_a_valid_scorecard_on_stdout():
    done = _grade_cli(str(ROOT / "exercises"), "--isolation", "process", "--json")
    assert done.returncode == 0, done.stderr
    assert (
        "NumPy" not in done.stderr
    )  # torch's import warning without numpy (not a dependency) reads like an error
    card = json.loads(done.stdout)
    schema.validate("scorecard", card)
    assert card["score"] == 0 and card["max_score"] == 100 and card["status"] == "graded"
    messages = [t["message"] for e in card["exercises"] for t in e["tests"] if not t["cuda"]]
    assert all("not implemented yet" in m for m in messages), [
        m for m in messages if "not implemented" not in m
    ][:3]


def test_each_run_draws_a_fresh_seed_and_seed_reproduces(tmp_path):
    sub = solutions_copy(tmp_path / "s")
    (sub / "masks.py").unlink()
    cards = [
        json.loads(_grade_cli(str(sub), "--isolation", "process", "--json").stdout)
        for _ in range(2)
    ]
    assert cards[0]["seed"] != cards[1]["seed"]


def test_a_broken_archive_is_an_error_scorecard_not_a_crash(tmp_path):
    bad = tmp_path / "alice.zip"
    bad.write_bytes(b"PK\x03\x04 truncated")
    done = _grade_cli(str(bad), "--json")
    assert done.returncode == 1  # as `grader batch`: an error card (0 on 4ad1d57)
    assert "error (intake): " in done.stderr  # the reason, beside the JSON
    card = json.loads(done.stdout)
    schema.validate("scorecard", card)
    assert card["status"] == "error" and card["error"]["kind"] == "intake" and card["score"] == 0


def test_require_isolation_refuses_a_weaker_backend(capsys):
    assert (
        main(
            [
                "grade",
                str(ROOT / "solutions"),
                "--isolation",
                "none",
                "--require-isolation",
                "process",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "refusing to grade" in err and "weaker than the required 'process'" in err


def test_unknown_assignment_is_a_usage_error(capsys):
    assert main(["grade", str(ROOT / "solutions"), "--assignment", "nope"]) == 2
    assert "no assignment 'nope'" in capsys.readouterr().err


def test_schema_command_prints_the_scorecard_schema(capsys):
    assert main(["schema", "scorecard"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert (
        printed["$schema"].endswith("2020-12/schema") and printed["additionalProperties"] is False
    )


@pytest.mark.skipif(STRONGEST != "namespace", reason="needs root on Linux")
def test_isolation_block_records_uid_limits_and_cgroup(tmp_path):
    card = json.loads(_grade_cli(str(ROOT / "solutions"), "--seed", "3", "--json").stdout)
    iso = card["isolation"]
    assert iso["backend"] == "namespace" and iso["uid"] >= isolation.UID_BASE
    assert iso["limits"]["memory_mb"] == 4096 and iso["limits"]["processes"] == 64
    assert iso["cgroup"] in ("v1", "v2", "none")
