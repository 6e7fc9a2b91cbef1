"""`grader check`: public tests in-process, a table that says what to fix, the public-only notice, --json."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys

import pytest

from grader import schema
from grader.check import local as check
from grader.cli.main import main
from tests.project.support.common import CORPUS, ROOT, solutions_copy


@pytest.fixture(scope="module")
def stub_card() -> dict:
    return check.check(exercises=["softmax", "causal_attention"], root=ROOT)


def test_stubs_fail_with_not_implemented_and_the_advice_names_the_file(stub_card):
    schema.validate("scorecard", stub_card)
    assert stub_card["isolation"]["backend"] == "inprocess" and stub_card["status"] == "graded"
    assert (stub_card["score"], stub_card["max_score"]) == (0, 18)
    assert check.failed(stub_card)
    messages = [t["message"] for e in stub_card["exercises"] for t in e["tests"]]
    assert messages and all("not implemented yet" in m for m in messages)
    rows = dict((r[0], r) for r in check.rows(stub_card))
    assert rows["softmax"][1] == "0 / 6"
    expected = (
        "open exercises/softmax.py and replace the `raise NotImplementedError` in softmax_naive"
    )
    assert expected in rows["softmax"][3]
    assert "CausalAttention.__init__" in rows["causal_attention"][3]


def test_render_says_public_tests_only(stub_card):
    out = io.StringIO()
    check.render(stub_card, out)
    text = " ".join(out.getvalue().split())
    assert "public tests only" in text and "hidden tests" in text and "0/18 public points" in text
    assert "All public tests passed" not in text


def test_solutions_pass_and_the_message_still_says_hidden_tests_decide(tmp_path):
    card = check.check(
        exercises=["softmax", "masks"], root=ROOT, student=solutions_copy(tmp_path / "s")
    )
    assert (card["score"], card["max_score"]) == (14, 14) and not check.failed(card)
    out = io.StringIO()
    check.render(card, out)
    text = " ".join(out.getvalue().split())
    assert "All public tests passed (14/14 public points)" in text and "hidden tests" in text


def test_a_buggy_causal_mask_gets_its_diagnosis_as_next_step(tmp_path):
    sub = solutions_copy(tmp_path / "s")
    shutil.copy(CORPUS / "buggy" / "causal_attention" / "no_mask.py", sub / "causal_attention.py")
    card = check.check(exercises=["causal_attention"], root=ROOT, student=sub)
    ((_exercise, points, failure, step),) = check.rows(card)
    assert points != "12 / 12" and "not implemented" not in failure
    assert "no causal mask at all" in step and "diagnosis" not in failure, (failure, step)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            "NotImplementedError: softmax.softmax_naive is not implemented yet (TODO: implement softmax_naive in softmax.py)",
            "replace the `raise NotImplementedError` in softmax_naive",
        ),
        (
            "`softmax_stable` not found in softmax.py: define it there",
            "define `softmax_stable` in exercises/softmax.py",
        ),
        (
            "BannedAPIError: torch.softmax is not allowed in this exercise: the point is to write it yourself",
            "torch.softmax is banned here",
        ),
        (
            "outputs differ\n  hint: set the scores above the diagonal to -inf",
            "set the scores above the diagonal to -inf",
        ),
        (
            "values differ\n  diagnosis [mask-missing]: your output equals attention with no mask",
            "your output equals attention with no mask",
        ),
        ("something odd", "pytest tests/public/test_softmax.py::test_x --pdb"),
    ],
)
def test_advice_maps_common_messages(message, expected):
    assert expected in check.advice(message, "softmax", "test_x")


def test_cli_exits_1_while_tests_fail_and_json_is_a_scorecard(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["check", "softmax", "--json"]) == 1
    card = json.loads(capsys.readouterr().out)
    schema.validate("scorecard", card)
    assert [e["id"] for e in card["exercises"]] == ["softmax"]


def test_cli_unknown_exercise_is_a_one_line_usage_error(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["check", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("grader: error: no exercise 'nope'") and "\n" not in err


def test_plain_pytest_on_the_public_tests_gives_the_same_messages():
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/public/test_softmax.py", "-q", "-p", "no:randomly"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1
    assert "5 failed" in done.stdout
    assert "softmax.softmax_naive is not implemented yet" in done.stdout
