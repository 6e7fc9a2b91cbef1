"""`grader ci --format github-classroom`: runner JSON in $GITHUB_OUTPUT, a tests array even on hang or crash."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

from grader import schema
from grader.check import ci
from grader.check import local as check
from grader.cli.main import main
from tests.project.support.common import ROOT


def _decode(github_output: Path) -> dict:
    lines = github_output.read_text().splitlines()
    assert len(lines) == 1 and lines[0].startswith("result=")
    result = json.loads(base64.b64decode(lines[0].removeprefix("result=")))
    schema.validate("github-classroom", result)
    return result


def _mini_repo(tmp_path: Path, softmax_source: str) -> Path:
    """A repository with the real manifest and public tests, whose softmax.py is ``softmax_source``."""
    (tmp_path / "tests" / "public").mkdir(parents=True)
    shutil.copy(ROOT / "assignments.json", tmp_path)
    for suite in (ROOT / "tests" / "public").glob(
        "test_*.py"
    ):  # every path the manifest names exists (28.8)
        shutil.copy(suite, tmp_path / "tests" / "public")
    (tmp_path / "exercises").mkdir()
    (tmp_path / "exercises" / "softmax.py").write_text(softmax_source)
    return tmp_path


def test_stubs_give_a_valid_runner_json_in_github_output_with_score_0(
    tmp_path, monkeypatch, capsys
):
    out = tmp_path / "gh_output"
    monkeypatch.setenv("GITHUB_OUTPUT", str(out))
    monkeypatch.chdir(ROOT)
    assert main(["ci", "--format", "github-classroom", "softmax", "masks"]) == 0
    result = _decode(out)
    assert result["status"] == "fail" and result["max_score"] == 14
    assert len(result["tests"]) == 9 and all(
        t["score"] == 0 and t["status"] == "fail" for t in result["tests"]
    )
    assert "public tests only" in result["message"]
    assert "0/14 public points" in capsys.readouterr().err


def test_without_github_output_the_json_is_printed(tmp_path, capsys):
    result = ci.ci(
        check.load(root=_mini_repo(tmp_path, "raise SystemExit(0)\n")), exercises=["softmax"]
    )
    ci.emit(result, github_output="")
    printed = json.loads(capsys.readouterr().out)
    assert printed == result and printed["tests"]


def test_a_hanging_submission_still_yields_a_tests_array(tmp_path):
    repo = _mini_repo(tmp_path, "import time\ntime.sleep(120)\n")
    result = ci.ci(check.load(root=repo), exercises=["softmax"], timeout_s=4)
    schema.validate("github-classroom", result)
    assert result["status"] == "error" and result["tests"]
    assert "did not finish within 4 s" in result["tests"][0]["message"]


def test_a_submission_that_kills_the_interpreter_still_yields_a_tests_array(tmp_path):
    repo = _mini_repo(tmp_path, "import os\nos._exit(7)\n")
    result = ci.ci(check.load(root=repo), exercises=["softmax"])
    assert result["status"] == "error" and result["tests"][0]["status"] == "error"
    assert "crashed (exit 7)" in result["tests"][0]["message"]
