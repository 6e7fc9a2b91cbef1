"""`grader release OUT`: the student repository leaks nothing and works on its own (fresh venv, its CI step)."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml

from grader import schema
from grader.cli.main import main
from grader.course import manifest
from grader.release import repository as release
from tests.project.support.common import ROOT, solutions_copy

pytestmark = pytest.mark.cost(18)  # seconds on 2 cores: started early (tests/project/conftest.py)

PUBLIC = ROOT / "tests" / "public"


def region_lines() -> set[str]:
    """Independently of release.py: every line of 8+ characters inside a solution region of solutions/*.py,
    minus lines the public tests already print verbatim (their hints, public by the instructor's choice)."""
    public = "\n".join(p.read_text() for p in PUBLIC.glob("*.py"))
    found, inside = set(), False
    for path in (ROOT / "solutions").glob("*.py"):
        for line in path.read_text().splitlines():
            text = line.strip()
            if "### BEGIN SOLUTION" in text:
                inside = True
            elif "### END SOLUTION" in text:
                inside = False
            elif inside and len(text) >= 8 and text not in public:
                found.add(text)
    return found


def leaks(folder: Path) -> list[tuple[str, str]]:
    lines = region_lines()
    assert len(lines) > 100  # the search has something to find
    return [
        (str(p.relative_to(folder)), line)
        for p in folder.rglob("*")
        if p.is_file()
        for line in lines
        if line in p.read_text(errors="replace")
    ]


@pytest.fixture(scope="module")
def released(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("release") / "student-repo"
    assert main(["release", str(out)]) == 0
    return out


def test_the_file_list_holds_no_solutions_hidden_tests_or_instructor_code(released):
    files = sorted(str(p.relative_to(released)) for p in released.rglob("*") if p.is_file())
    top = {f.split("/")[0] for f in files}
    assert top == {
        ".github",
        ".gitignore",
        "README.md",
        "assignments.json",
        "exercises",
        "grader",
        "pyproject.toml",
        "tests",
    }
    assert not any(f.startswith(("solutions", "tests/hidden")) or "corpus" in f for f in files)
    for instructor_only in (
        "grader/sandbox",
        "grader/batch",
        "grader/intake",
        "grader/course/build.py",
        "grader/grade.py",
        "grader/release",
        "grader/cluster",
        "grader/cli/main.py",
    ):
        assert not any(f.startswith(instructor_only) for f in files), instructor_only
    spec = manifest.load(ROOT / "assignments.json")
    assert {f for f in files if f.startswith("tests/")} == {e.public_tests for e in spec.exercises}
    assert {f for f in files if f.startswith("exercises/")} == {
        f"exercises/{e.module}.py" for e in spec.exercises
    } | {"exercises/__init__.py"}


def test_no_line_of_any_solution_region_is_in_any_released_file(released):
    assert leaks(released) == []


def test_the_leak_scan_would_catch_a_solution(released, tmp_path):
    copy = shutil.copytree(released, tmp_path / "copy")
    shutil.copy(ROOT / "solutions" / "softmax.py", copy / "exercises" / "softmax.py")
    assert any(f == "exercises/softmax.py" for f, _ in leaks(copy))
    assert release.scan(copy, release.solution_lines(ROOT / "solutions", public=PUBLIC))


def test_the_workflow_is_what_classroom_expects(released):
    flow = yaml.safe_load((released / ".github" / "workflows" / "classroom.yml").read_text())
    assert flow["name"] == "Autograding Tests" and list(flow["jobs"]) == ["run-autograding-tests"]
    steps = flow["jobs"]["run-autograding-tests"]["steps"]
    assert steps[0]["uses"].startswith("actions/checkout@")
    install = next(s["run"] for s in steps if "pip install -e ." in s.get("run", ""))
    assert "--index-url https://download.pytorch.org/whl/cpu" in install and "torch==2." in install
    runner = next(s for s in steps if "grader ci --format github-classroom" in s.get("run", ""))
    reporter = steps[-1]
    assert reporter["uses"] == "classroom-resources/autograding-grading-reporter@v1"
    assert reporter["with"]["runners"] == runner["id"] and runner["id"].isalnum()
    assert reporter["env"] == {
        f"{runner['id'].upper()}_RESULTS": "${{steps." + runner["id"] + ".outputs.result}}"
    }


def test_readme_and_pyproject_tell_students_how_it_works(released):
    readme = " ".join((released / "README.md").read_text().split())
    for phrase in (
        "grader check",
        "pytest tests/public",
        "public tests only",
        "hidden tests",
        "pip install -e .",
        "download.pytorch.org/whl/cpu",
        "anything the workflow can read the student can read",
    ):
        assert phrase in readme, phrase
    pyproject = (released / "pyproject.toml").read_text()
    assert (
        'grader = "grader.cli.student:student_run"' in pyproject
        and "grader.testing.plugin" in pyproject
    )


def test_release_refuses_a_non_empty_folder(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert main(["release", str(tmp_path)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert (
        main(["release", str(tmp_path), "--force"]) == 2
    )  # --force only replaces an earlier release
    assert (tmp_path / "notes.txt").exists()


def _run(cmd: list[str], cwd: Path, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _ci(venv_bin: Path, repo: Path, env: dict, tmp: Path) -> dict:
    out = tmp / "gh_output"
    out.unlink(missing_ok=True)
    done = _run(
        [str(venv_bin / "grader"), "ci", "--format", "github-classroom"],
        repo,
        {**env, "GITHUB_OUTPUT": str(out)},
    )
    assert done.returncode == 0, done.stderr
    (line,) = out.read_text().splitlines()
    result = json.loads(base64.b64decode(line.removeprefix("result=")))
    schema.validate("github-classroom", result)
    return result


@pytest.mark.slow
def test_the_release_works_standalone_in_a_fresh_venv(released, tmp_path):
    repo = shutil.copytree(released, tmp_path / "repo")
    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    bin_ = venv / "bin"
    # the declared dependencies (torch, pytest, jsonschema, rich) come from this environment's site folders,
    # added as plain paths: their .pth files (this checkout's own editable `grader`) are not processed
    new_site = Path(
        subprocess.run(
            [
                str(bin_ / "python"),
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (new_site / "_deps.pth").write_text("".join(f"{d}\n" for d in sorted(ours)))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GITHUB_OUTPUT")}
    env["PATH"] = f"{bin_}{os.pathsep}{env['PATH']}"
    done = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(bin_ / "python"),
            "install",
            "-q",
            "--no-deps",
            "-e",
            ".",
        ],
        repo,
        env,
    )
    assert done.returncode == 0, done.stderr
    where = _run(
        [str(bin_ / "python"), "-c", "import grader; print(grader.__file__)"], tmp_path, env
    )
    assert where.stdout.strip() == str(repo / "grader" / "__init__.py"), where.stdout + where.stderr

    n = sum(
        path.read_text().count("\ndef test_")
        for path in (repo / "tests" / "public").glob("test_*.py")
    )
    stubs = _run([str(bin_ / "python"), "-m", "pytest", "-q"], repo, env)
    assert stubs.returncode == 1 and f"{n} failed" in stubs.stdout, stubs.stdout[-2000:]
    assert stubs.stdout.count("is not implemented yet") >= n
    result = _ci(bin_, repo, env, tmp_path)
    assert (result["status"], result["max_score"], sum(t["score"] for t in result["tests"])) == (
        "fail",
        100,
        0,
    )
    assert len(result["tests"]) == n

    solutions_copy(repo / "exercises")  # a student who finished everything
    solved = _run([str(bin_ / "python"), "-m", "pytest", "-q"], repo, env)
    assert solved.returncode == 0 and f"{n} passed" in solved.stdout, solved.stdout[-2000:]
    result = _ci(bin_, repo, env, tmp_path)
    assert (result["status"], result["max_score"], sum(t["score"] for t in result["tests"])) == (
        "pass",
        100,
        100,
    )
    points = re.findall(
        r"@pytest\.mark\.points\(([0-9.]+)\)",
        "".join(p.read_text() for p in (repo / "tests" / "public").glob("test_*.py")),
    )
    assert sorted({t["score"] for t in result["tests"]}) == sorted(
        {float(p) for p in points}
    )  # each test's own
    checked = _run([str(bin_ / "grader"), "check"], repo, {**env, "COLUMNS": "200"})
    assert checked.returncode == 0 and "All public tests passed (100/100" in checked.stdout, (
        checked.stdout
    )
