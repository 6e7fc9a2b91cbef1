"""`grader release --assignment ID|all --manifest FILE`: either assignment, or each one, from the manifest
given; a released repository holds its assignment alone, and its `grader check` grades that one, with the same
table and messages as the first assignment's: stubs 0, filled solutions every public point, one exercise alone."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.cli.main import main
from grader.course import manifest
from grader.release import repository as release
from tests.project.support.common import ROOT, solutions_copy

SPECS = {a.id: a for a in manifest.load_all()}
MODERN = "attention-modern"


def _modules(folder: Path) -> set[str]:
    return {p.stem for p in folder.glob("*.py") if p.name != "__init__.py"}


def test_the_second_assignment_is_released_alone(tmp_path):
    out = tmp_path / "repo"
    assert main(["release", str(out), "--assignment", MODERN]) == 0
    spec = SPECS[MODERN]
    assert _modules(out / "exercises") == {e.module for e in spec.exercises}
    assert {p.name for p in (out / "tests" / "public").glob("test_*.py")} == {
        Path(e.public_tests).name for e in spec.exercises
    }
    shipped = json.loads((out / "assignments.json").read_text())
    assert [a["id"] for a in shipped["assignments"]] == [MODERN]
    assert (
        release.scan(
            out, release.solution_lines(ROOT / "solutions", public=ROOT / "tests" / "public")
        )
        == []
    )
    assert spec.title in (out / "README.md").read_text()


@pytest.fixture(scope="module")
def modern_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("modern") / "repo"
    assert main(["release", str(out), "--assignment", MODERN]) == 0
    return out


def _check(repo: Path, *args: str) -> subprocess.CompletedProcess:
    """`grader check` as a student runs it in the repository (its own `grader` package), on a wide terminal."""
    return subprocess.run(
        [sys.executable, "-m", "grader", "check", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "250"},
    )


def test_check_of_the_modern_stubs_says_what_to_do_next(modern_repo):
    done = _check(modern_repo)
    text = " ".join(done.stdout.split())
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert "grader check: public tests" in text and "0/100 public points" in text
    assert (
        "public tests only" in text
        and "hidden tests" in text
        and "All public tests passed" not in text
    )
    for exercise in SPECS[MODERN].exercises:
        assert f"{exercise.id} │ 0 / {exercise.points:g}" in text, exercise.id
    assert (
        "open exercises/rope.py and replace the `raise NotImplementedError` in rope_frequencies"
        in text
    )
    assert "is not implemented yet" in text


def test_check_of_filled_solutions_gives_every_public_point(modern_repo, tmp_path):
    repo = shutil.copytree(modern_repo, tmp_path / "repo")
    solutions_copy(repo / "exercises")  # a student who finished everything
    for module in (
        "rope",
        "kv_cache",
    ):  # the copies are the student's own: not a line of solutions/ was shipped
        assert (repo / "exercises" / f"{module}.py").read_text() == (
            ROOT / "solutions" / f"{module}.py"
        ).read_text()
    done = _check(repo)
    text = " ".join(done.stdout.split())
    assert done.returncode == 0 and "All public tests passed (100/100 public points)" in text, text[
        -3000:
    ]
    assert "hidden tests" in text
    card = json.loads(_check(repo, "--json").stdout)
    assert {e["id"]: e["score"] for e in card["exercises"]} == {
        e.id: e.points for e in SPECS[MODERN].exercises
    }


def test_check_of_one_exercise_runs_its_public_tests_alone(modern_repo, tmp_path):
    repo = shutil.copytree(modern_repo, tmp_path / "repo")
    shutil.copy(ROOT / "solutions" / "rope.py", repo / "exercises" / "rope.py")
    done = _check(repo, "rope")
    text = " ".join(done.stdout.split())
    assert done.returncode == 0 and "All public tests passed (16/16 public points)" in text, text[
        -3000:
    ]
    assert "grouped_query_attention" not in text
    wrong_half = ROOT / "tests" / "corpus" / "buggy" / "rope" / "rotates_the_wrong_half.py"
    shutil.copy(wrong_half, repo / "exercises" / "rope.py")
    card = json.loads(_check(repo, "rope", "--json").stdout)
    assert [e["id"] for e in card["exercises"]] == ["rope"] and 0 < card["score"] < 16
    failure = next(t["message"] for t in card["exercises"][0]["tests"] if t["outcome"] != "passed")
    assert "first mismatch" in failure and "hint: half-split pairing" in failure, (
        failure
    )  # got vs expected, the hint


def test_grader_check_in_a_released_repository_grades_its_own_assignment(tmp_path):
    out = tmp_path / "repo"
    assert main(["release", str(out), "--assignment", MODERN]) == 0
    done = subprocess.run(
        [sys.executable, "-m", "grader", "check", "--json"],
        cwd=out,
        capture_output=True,
        text=True,
        timeout=300,
    )
    card = json.loads(done.stdout)
    assert card["assignment"] == MODERN
    assert {e["id"] for e in card["exercises"]} == set(SPECS[MODERN].ids())
    assert card["score"] == 0 and card["max_score"] == pytest.approx(100)  # the stubs


def test_all_writes_every_output_once_per_assignment(tmp_path):
    args = [
        "release",
        str(tmp_path / "repo"),
        "--assignment",
        "all",
        "--gradescope",
        str(tmp_path / "gs.zip"),
        "--classroom50",
        str(tmp_path / "c50"),
    ]
    assert main(args) == 0
    for spec in SPECS.values():
        assert _modules(tmp_path / "repo" / spec.id / "exercises") == {
            e.module for e in spec.exercises
        }
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
    assert (
        "no assignment 'nope'" in err
        and "attention-basics" in err
        and not (tmp_path / "repo").exists()
    )
