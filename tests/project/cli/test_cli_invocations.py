"""Bad invocations are refused before any grading, with one line that says what to do, and a non-zero exit;
an --out folder inside the class folder is never taken for a student; intake errors set the batch's exit."""

from __future__ import annotations

import json
import shutil

import pytest

from grader.cli.main import main
from tests.project.support.common import ROOT

pytestmark = pytest.mark.cost(11)  # seconds on 2 cores: started early (tests/project/conftest.py)


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("grader: error: ") and "\n" not in err and "Traceback" not in err, err
    return err


def test_grade_on_a_missing_path_exits_2_and_writes_no_card(tmp_path, capsys):
    out = tmp_path / "card.json"
    assert main(["grade", str(tmp_path / "nope"), "--out", str(out)]) == 2
    assert "submission not found" in _one_line_error(capsys)
    assert not out.exists()


def test_grade_refuses_an_out_that_is_a_folder_before_grading(tmp_path, capsys):
    assert main(["grade", str(ROOT / "solutions"), "--out", str(tmp_path)]) == 2
    assert "is a folder" in _one_line_error(capsys)
    assert list(tmp_path.iterdir()) == []


def test_batch_on_an_empty_folder_says_so(tmp_path, capsys):
    (tmp_path / "class").mkdir()
    assert main(["batch", str(tmp_path / "class"), "--out", str(tmp_path / "out")]) == 2
    assert "no submissions found" in _one_line_error(capsys)
    assert not (tmp_path / "out" / "scorecards").exists()


def test_batch_refuses_an_out_that_is_a_file(tmp_path, capsys):
    (tmp_path / "class" / "alice").mkdir(parents=True)
    (tmp_path / "out.json").write_text("{}")
    assert main(["batch", str(tmp_path / "class"), "--out", str(tmp_path / "out.json")]) == 2
    assert "is a file" in _one_line_error(capsys)
    assert (tmp_path / "out.json").read_text() == "{}"


def test_an_out_folder_inside_the_class_is_never_a_student_and_intake_errors_set_the_exit(
    tmp_path, capsys
):
    klass = tmp_path / "class"
    (klass / "alice").mkdir(parents=True)
    shutil.copy(ROOT / "solutions" / "softmax.py", klass / "alice" / "softmax.py")
    (klass / "broken.zip").write_bytes(b"not a zip")
    out = klass / "out"
    args = [
        "batch",
        str(klass),
        "--out",
        str(out),
        "--exercise",
        "softmax",
        "--quiet",
        "--per-test-time-limit",
        "8",
    ]
    code = main(args)
    err = capsys.readouterr().err
    assert code == 1, err  # broken.zip is an intake error: the exit status says so
    assert "1 submission(s) ended in an intake error" in err
    assert sorted(p.stem for p in (out / "scorecards").glob("*.json")) == ["alice", "broken"]
    assert json.loads((out / "scorecards" / "alice.json").read_text())["score"] == 6
    code = main(args)
    assert code == 1, (
        capsys.readouterr().err
    )  # the rerun: `out` (now full of scorecards) is still not a student
    assert sorted(p.stem for p in (out / "scorecards").glob("*.json")) == ["alice", "broken"]
