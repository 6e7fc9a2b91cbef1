"""An error card (scorecard schema 3: ``error`` tied to ``status``) exports as before; one without its error is
refused where it is read (``grader export``), naming the file, instead of failing later in the summary."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from grader import schema
from grader.cli.main import main
from grader.course import manifest
from grader.exports import outputs
from grader.exports.summary import summarize
from tests.project.exports.test_outputs_hostile import card

ZIP = "bob.zip: not a valid zip archive"


def _files(tmp_path: Path, version: int = 3) -> list[str]:
    named = {"alice": card("alice", score=3.5), "bob": card("bob", error=ZIP)}
    named["bob"]["schema_version"] = version
    for key, c in named.items():
        schema.validate("scorecard", c)
        (tmp_path / f"{key}.json").write_text(json.dumps(c))
    return [str(tmp_path / f"{key}.json") for key in named]


@pytest.mark.parametrize("version", [3, 2])
def test_a_valid_error_card_exports_in_every_format(tmp_path, version):
    files = _files(tmp_path, version)
    for fmt in outputs.FORMATS:
        assert main(["export", *files, "--format", fmt, "--out", str(tmp_path / fmt)]) == 0
    rows = list(csv.DictReader(io.StringIO((tmp_path / "csv" / "gradebook.csv").read_text())))
    assert [(r["student"], r["status"], r["error"]) for r in rows] == [
        ("alice", "graded", ""),
        ("bob", "error", "intake"),
    ]
    bob = json.loads((tmp_path / "gradescope" / "bob" / "results.json").read_text())
    assert bob["extra_data"]["error"] == {"kind": "intake", "message": ZIP}
    named = [(Path(f).stem, json.loads(Path(f).read_text())) for f in files]
    summary = summarize(
        named, assignment=manifest.load(), backend="namespace", slots=1, wall_s=1.0, skipped=0
    )
    schema.validate("summary", summary)
    assert [(e["student"], e["kind"]) for e in summary["errors"]] == [("bob", "intake")]


def test_grader_export_refuses_an_error_card_without_its_error(tmp_path, capsys):
    files = _files(tmp_path)
    bob = json.loads(Path(files[1]).read_text())
    Path(files[1]).write_text(json.dumps({**bob, "error": None}))  # hand-edited
    assert main(["export", *files, "--format", "csv", "--out", str(tmp_path / "out")]) == 2
    said = capsys.readouterr().err
    assert files[1] in said and "at error: None is not of type 'object'" in said
    assert "status error names its error" in said and not (tmp_path / "out").exists()
