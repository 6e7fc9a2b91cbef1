"""`grader release --classroom50 DIR`: the template repository, the public-only autograder bundle
Classroom 50 runs (its result.json contract), and the folder `gh teacher download` writes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from grader import schema
from grader.cli.main import main
from grader.course import manifest
from grader.intake import classroom50 as downloads
from grader.release import classroom50, texts
from tests.project.support.common import ROOT

RUNNER_ENV = {
    "CLASSROOM": "cs-principles",
    "ASSIGNMENT": "attention-basics",
    "SUBMISSION_TAG": "submit/2026-10-01T12-00-00Z-abc1234",
    "COMMIT_URL": "https://github.com/org/cs-principles-attention-basics-alice/commit/abc1234",
    "RELEASE_URL": "https://github.com/org/cs-principles-attention-basics-alice/releases/tag/submit%2Fx",
    "CLASSROOM50_SKIP_INSTALL": "1",
}


@pytest.fixture(scope="module")
def released(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("c50") / "release"
    assert main(["release", "--classroom50", str(out)]) == 0
    return out


def bundle_of(released: Path) -> Path:
    return released / "autograders" / manifest.DEFAULT_ASSIGNMENT


def test_the_template_repository_is_the_student_release_without_the_retired_workflow(released):
    template = released / "template"
    assert (template / "exercises" / "softmax.py").is_file() and (
        template / "tests" / "public"
    ).is_dir()
    assert (template / "grader" / "check" / "local.py").is_file() and (
        template / "pyproject.toml"
    ).is_file()
    assert not (template / ".github").exists() and not (template / "solutions").exists()
    assert "Classroom 50 runs the public tests" in (template / "README.md").read_text()


def test_the_bundle_holds_no_hidden_test_and_no_solution(released):
    """Classroom 50 serves the bundle publicly: no hidden test file, line or solution line may be in it."""
    bundle = bundle_of(released)
    files = [p for p in bundle.rglob("*") if p.is_file()]
    assert (bundle / "autograder.py").is_file() and (
        bundle / "tests" / "public" / "test_softmax.py"
    ).is_file()
    assert not any("hidden" in p.relative_to(bundle).parts or "solutions" in p.parts for p in files)
    public = "\n".join(p.read_text() for p in (released / "template").rglob("*") if p.is_file())
    hidden = {
        line.strip()
        for p in (ROOT / "tests" / "hidden").glob("test_*.py")
        for line in p.read_text().splitlines()
        if len(line.strip()) >= 20 and line.strip() not in public
    }
    assert len(hidden) > 100  # the search has something to find
    text = "\n".join(p.read_text(errors="replace") for p in files)
    assert not [line for line in hidden if line in text]
    assert not [p for p in (ROOT / "tests" / "hidden").glob("test_*.py") if p.read_text() in text]


def test_a_hidden_test_in_the_bundle_is_found(released, tmp_path):
    bundle = tmp_path / "bundle"
    shutil.copytree(bundle_of(released), bundle)
    spec = manifest.load()
    assert classroom50.leaks(bundle, spec, shown=released / "template") == []
    shutil.copy(
        ROOT / "tests" / "hidden" / "test_masks.py",
        bundle / "tests" / "public" / "test_masks_more.py",
    )
    assert classroom50.leaks(bundle, spec, shown=released / "template")


def grade_repo(
    released: Path, repo: Path, exercises: Path, *, tamper: bool = False
) -> tuple[int, dict | None]:
    """The template filled with ``exercises``, graded by the bundle's autograder.py as the runner runs it."""
    shutil.copytree(released / "template", repo)
    if tamper:  # what a student could push: public tests that always pass
        for path in (repo / "tests" / "public").glob("test_*.py"):
            path.write_text("def test_nothing():\n    assert True\n")
    for path in exercises.glob("*.py"):
        shutil.copy(path, repo / "exercises" / path.name)
    bundle = bundle_of(released)
    done = subprocess.run(
        [sys.executable, str(bundle / "autograder.py")],
        cwd=repo,
        capture_output=True,
        text=True,
        env={**os.environ, "CLASSROOM50_BUNDLE_DIR": str(bundle), **RUNNER_ENV},
        timeout=900,
    )
    result = repo / "result.json"
    return done.returncode, (json.loads(result.read_text()) if result.is_file() else None)


UNIT = classroom50.scale(
    [ROOT / e.public_tests for e in manifest.load(ROOT / "assignments.json").exercises]
)


def test_the_autograder_gives_full_points_to_the_solutions(released, tmp_path):
    code, result = grade_repo(released, tmp_path / "repo", ROOT / "solutions")
    assert code == 0
    schema.validate("classroom50-result", result)
    assert result["schema"] == "classroom50/result/v1" and result["classroom"] == "cs-principles"
    # 100 points in the smallest unit that makes every public test's points whole (0.25 exists: quarter points)
    assert result["score"] == result["max-score"] == 100 * UNIT == 400
    assert (
        all(t["passed"] for t in result["tests"])
        and sum(t["points"] for t in result["tests"]) == 100
    )
    assert result["review"] == RUNNER_ENV["COMMIT_URL"]  # no REVIEW_URL: the commit view


def test_the_autograder_gives_zero_to_the_stubs_and_still_exits_0(released, tmp_path):
    code, result = grade_repo(released, tmp_path / "repo", ROOT / "exercises")
    assert code == 0  # failing tests are a result, not an infrastructure error
    schema.validate("classroom50-result", result)
    assert (
        result["score"] == 0
        and result["max-score"] == 100 * UNIT
        and not any(t["passed"] for t in result["tests"])
    )


def test_tampered_tests_in_the_students_checkout_change_nothing(released, tmp_path):
    """The bundle's own copies grade: a student who empties tests/public in the repository gains nothing."""
    code, result = grade_repo(released, tmp_path / "repo", ROOT / "exercises", tamper=True)
    assert code == 0 and result["score"] == 0


def test_missing_runner_context_is_an_infrastructure_error(released, tmp_path):
    env = {k: v for k, v in RUNNER_ENV.items() if k != "SUBMISSION_TAG"}
    stripped = {k: v for k, v in os.environ.items() if k not in RUNNER_ENV}
    repo = tmp_path / "repo"
    shutil.copytree(released / "template", repo)
    done = subprocess.run(
        [sys.executable, str(bundle_of(released) / "autograder.py")],
        cwd=repo,
        capture_output=True,
        text=True,
        env={**stripped, **env},
    )
    assert (
        done.returncode == 2
        and "[INFRASTRUCTURE]" in done.stderr
        and not (repo / "result.json").exists()
    )


def _download(
    root: Path, logins: list[str], prefix: str = "cs-principles-attention-basics"
) -> Path:
    root.mkdir(parents=True)
    (root / "scores.csv").write_text(
        "username,first_name,last_name,email,section,score,max_score,datetime,"
        "submission_tag,submitted_by,review_url,late,override\n"
        + "".join(f"{u},,,,,,,,,,,,\n" for u in logins)
    )
    for login in logins:
        repo = root / f"{prefix}-{login.lower()}"
        (repo / "exercises").mkdir(parents=True)
        (repo / "exercises" / "softmax.py").write_text("x = 1\n")
        (repo / "result.json").write_text("{}")
    return root


def test_the_gh_teacher_download_folder_yields_login_and_repository(tmp_path):
    root = _download(
        tmp_path / "cs-principles-attention-basics_submissions_2026_10_02_T_09_15_00",
        ["alice", "Bob-Smith"],
    )
    (root / "cs-principles-attention-basics-mallory").symlink_to("/etc")
    assert downloads.is_download(root)
    entries = dict(downloads.download_entries(root))
    assert entries == {
        "alice": root / "cs-principles-attention-basics-alice",
        "Bob-Smith": root / "cs-principles-attention-basics-bob-smith",
        "mallory": root / "cs-principles-attention-basics-mallory",
    }  # the link: the caller refuses it


def test_a_download_with_a_literal_dir_name_is_recognised_by_scores_csv(tmp_path):
    root = _download(tmp_path / "submissions", ["carol"], prefix="my-class-hw-1")
    assert downloads.is_download(root)
    assert list(downloads.download_entries(root)) == [("carol", root / "my-class-hw-1-carol")]
    plain = tmp_path / "class"
    (plain / "dave" / "exercises").mkdir(parents=True)
    assert not downloads.is_download(plain)


def test_a_by_pattern_download_into_a_named_folder_gives_logins_not_repository_names(tmp_path):
    """`gh teacher download -d DIR --by-pattern` writes no scores.csv into a folder of any name (issue 28.15): the
    login is what follows `-<assignment>-`, as for the timestamped folder (on 4ad1d57 the whole repository name
    was the id, so a roster marked everyone missing)."""
    from grader.exports import lms
    from grader.intake import classfolder as discover
    from grader.intake import roster

    root = _download(tmp_path / "hw", ["alice", "bob-smith"])
    (root / "scores.csv").unlink()
    (root / "cs-principles-attention-basics-mallory").symlink_to("/etc")
    found = discover.discover(root, assignment="attention-basics")
    assert found.layout == "classroom50"
    by_id = {e.student: e for e in found.entries}
    assert set(by_id) == {"alice", "bob-smith", "mallory"} and "link" in by_id["mallory"].clash
    assert by_id["bob-smith"].path == root / "cs-principles-attention-basics-bob-smith"
    students = roster.parse("login,name\nalice,Alice\nbob-smith,Bob\n")
    lines = lms.join([(e.key, {"status": "graded"}) for e in found.entries], students)
    assert [
        line.key for line in lines if line.card is None
    ] == []  # nobody on the roster is missing
    other = _download(
        tmp_path / "class", ["carol"], prefix="cs-principles-transformers"
    )  # another assignment's
    (other / "scores.csv").unlink()
    assert discover.discover(other, assignment="attention-basics").layout == "folder"


def test_the_github_classroom_workflow_uses_node24_actions(tmp_path):
    assert main(["release", str(tmp_path / "repo")]) == 0
    steps = yaml.safe_load(
        (tmp_path / "repo" / ".github" / "workflows" / "classroom.yml").read_text()
    )["jobs"]["run-autograding-tests"]["steps"]
    uses = [s["uses"] for s in steps if "uses" in s]
    assert uses[:2] == ["actions/checkout@v6", "actions/setup-python@v6"]
    assert "@v4" not in texts.WORKFLOW.template and "setup-python@v5" not in texts.WORKFLOW.template


def test_batch_discovers_a_gh_teacher_download_and_refuses_its_links(tmp_path):
    from grader.intake import classfolder as discover

    root = _download(
        tmp_path / "cs-principles-attention-basics_submissions_2026_10_02_T_09_15_00",
        ["alice", "bob"],
    )
    (root / "cs-principles-attention-basics-mallory").symlink_to("/etc")
    found = discover.discover(root)
    assert found.layout == "classroom50"
    by_id = {e.student: e for e in found.entries}
    assert set(by_id) == {"alice", "bob", "mallory"}
    assert (
        by_id["alice"].path == root / "cs-principles-attention-basics-alice"
        and not by_id["alice"].clash
    )
    assert "link" in by_id["mallory"].clash  # never followed: an intake-error scorecard names it
