"""`grader release --assignment ID|all --manifest FILE`: either assignment, or each one, from the manifest
given; a released repository holds its assignment alone, and its `grader check` grades that one."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader import manifest
from grader.classroom import release
from grader.cli import main
from tests.project.conftest import ROOT

SPECS = {a.id: a for a in manifest.load_all()}
MODERN = "attention-modern"


def _modules(folder: Path) -> set[str]:
    return {p.stem for p in folder.glob("*.py") if p.name != "__init__.py"}


def test_the_second_assignment_is_released_alone(tmp_path):
    out = tmp_path / "repo"
    assert main(["release", str(out), "--assignment", MODERN]) == 0
    spec = SPECS[MODERN]
    assert _modules(out / "exercises") == {e.module for e in spec.exercises}
    assert {p.name for p in (out / "tests" / "public").glob("test_*.py")} == {Path(e.public_tests).name
                                                                             for e in spec.exercises}
    shipped = json.loads((out / "assignments.json").read_text())
    assert [a["id"] for a in shipped["assignments"]] == [MODERN]
    assert release.scan(out, release.solution_lines(ROOT / "solutions", public=ROOT / "tests" / "public")) == []
    assert spec.title in (out / "README.md").read_text()


def test_grader_check_in_a_released_repository_grades_its_own_assignment(tmp_path):
    out = tmp_path / "repo"
    assert main(["release", str(out), "--assignment", MODERN]) == 0
    done = subprocess.run([sys.executable, "-m", "grader", "check", "--json"], cwd=out, capture_output=True,
                          text=True, timeout=300)
    card = json.loads(done.stdout)
    assert card["assignment"] == MODERN
    assert {e["id"] for e in card["exercises"]} == set(SPECS[MODERN].ids())
    assert card["score"] == 0 and card["max_score"] == pytest.approx(100)  # the stubs


def test_all_writes_every_output_once_per_assignment(tmp_path):
    args = ["release", str(tmp_path / "repo"), "--assignment", "all", "--gradescope", str(tmp_path / "gs.zip"),
            "--classroom50", str(tmp_path / "c50")]
    assert main(args) == 0
    for spec in SPECS.values():
        assert _modules(tmp_path / "repo" / spec.id / "exercises") == {e.module for e in spec.exercises}
        assert (tmp_path / f"gs-{spec.id}.zip").is_file()
        assert (tmp_path / "c50" / spec.id / "autograders" / spec.id / "autograder.py").is_file()
    assert not (tmp_path / "gs.zip").exists()


def test_the_manifest_given_is_the_one_released(tmp_path):
    course = tmp_path / "course"
    for name in ("exercises", "solutions", "tests/public"):
        shutil.copytree(ROOT / name, course / name, ignore=shutil.ignore_patterns("__pycache__"))
    document = json.loads((ROOT / "assignments.json").read_text())
    document["assignments"][0]["title"] = "Attention, spring term"
    (course / "assignments.json").write_text(json.dumps(document))
    out = tmp_path / "repo"
    assert main(["release", str(out), "--manifest", str(course / "assignments.json")]) == 0
    assert "Attention, spring term" in (out / "README.md").read_text()


def test_an_unknown_assignment_is_a_usage_error(tmp_path, capsys):
    assert main(["release", str(tmp_path / "repo"), "--assignment", "nope"]) == 2
    err = capsys.readouterr().err
    assert "no assignment 'nope'" in err and "attention-basics" in err and not (tmp_path / "repo").exists()
