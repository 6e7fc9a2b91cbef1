"""`grader release --gradescope ZIP`: the zip Gradescope expects, run end to end in a root-like tree.

The zip is unpacked into ``tmp_path`` as Gradescope lays out ``/autograder`` (``source/``,
``submission/``, ``results/``), ``setup.sh`` runs with only its network part skipped
(``GRADER_SETUP_SKIP_INSTALL=1``: apt-get and pip), and ``run_autograder`` grades under ``process``
isolation as Gradescope's containers allow it: as root, the student's code runs as a leased uid.
That uid must reach an interpreter: pyenv's lives under ``/root`` (0700), so the tests build a
``--without-pip`` venv from the system interpreter of the same version, in a folder anyone may
enter, that sees this checkout and its packages through a ``.pth`` file (as ``pip install`` does
on Gradescope, in ``/opt``).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader import schema
from grader.cli.main import main
from grader.exports import gradescope as gradescope_results
from grader.exports import late
from grader.release import course
from tests.project.support import readable
from tests.project.support.common import ROOT, solutions_copy

pytestmark = pytest.mark.cost(27)  # seconds on 2 cores: started early (tests/project/conftest.py)

LATE_POLICY = {"per_day": 0.1, "max_fraction": 0.5, "grace_minutes": 60}
DUE = "2026-10-01T23:59:00-07:00"


@pytest.fixture(scope="module")
def python() -> Iterator[Path]:
    """A venv anyone may run, on this interpreter version, seeing this checkout and its packages."""
    with readable.venv() as found:
        if found is None:
            pytest.skip(
                "no Python of this version that an unprivileged uid can run (needed for `process` as root)"
            )
        yield found


@pytest.fixture(scope="module")
def zip_path(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gs") / "autograder.zip"
    assert main(["release", "--gradescope", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def tree(zip_path, python, tmp_path_factory) -> Path:
    """/autograder, as Gradescope builds it: the zip in source/, setup.sh run (network part skipped), which proves
    the grader once under run_autograder's configuration."""
    root = tmp_path_factory.mktemp("autograder")
    course.extract(zip_path, root / "source")
    manifest = json.loads((root / "source" / "assignments.json").read_text())
    manifest["assignments"][0]["late_policy"] = (
        LATE_POLICY  # optional: checked by the extended schema
    )
    (root / "source" / "assignments.json").write_text(json.dumps(manifest))
    for folder in ("submission", "results"):
        (root / folder).mkdir()
    done = subprocess.run(
        ["bash", str(root / "source" / "setup.sh")],
        capture_output=True,
        text=True,
        env={**os.environ, **_image_env(root, python), "GRADER_SETUP_SKIP_INSTALL": "1"},
    )
    assert done.returncode == 0, done.stderr
    assert "proven in the image" in done.stdout, done.stdout + done.stderr
    return root


def _image_env(root: Path, python: Path) -> dict[str, str]:
    """What setup.sh and run_autograder share on a Gradescope image: the tree, the Python, the cache."""
    return {
        "GRADER_AUTOGRADER_ROOT": str(root),
        "GRADER_PYTHON": str(python),
        "GRADER_ISOLATION": "process",
        "GRADER_CACHE_DIR": str(root.parent / f"{root.name}-cache"),
    }


def run_autograder(
    tree: Path, python: Path, submission: dict[str, str] | Path, *, metadata: dict | None = None
) -> tuple[int, dict]:
    sub = tree / "submission"
    shutil.rmtree(sub)
    if isinstance(submission, Path):
        shutil.copytree(
            submission, sub, symlinks=True
        )  # as uploaded: a repository's .venv links stay links
    else:
        sub.mkdir()
        for name, text in submission.items():
            (sub / name).write_text(text)
    meta = tree / "submission_metadata.json"
    meta.unlink(missing_ok=True)
    if metadata:
        meta.write_text(json.dumps(metadata))
    env = {**os.environ, **_image_env(tree, python)}
    done = subprocess.run(
        ["bash", str(tree / "source" / "run_autograder")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    results = json.loads((tree / "results" / "results.json").read_text())
    schema.validate("gradescope-results", results)
    return done.returncode, results


def test_the_zip_has_setup_sh_and_run_autograder_at_its_root_and_the_whole_course(zip_path):
    with zipfile.ZipFile(zip_path) as zf:
        infos = {i.filename: i for i in zf.infolist()}
        setup = zf.read("setup.sh").decode()
    for script in ("setup.sh", "run_autograder"):
        assert (infos[script].external_attr >> 16) & 0o777 == 0o755
    assert {
        "assignments.json",
        "pyproject.toml",
        "gradescope.json",
        "grader/release/gradescope_run.py",
        "solutions/softmax.py",
        "exercises/softmax.py",
        "tests/hidden/test_softmax.py",
        "tests/public/test_softmax.py",
    } <= set(infos)
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in infos)
    assert 'pip" install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu' in setup
    assert "sys.version_info < (3, 11)" in setup and "python3.11-venv" in setup
    assert 'pip" install "$SOURCE"' in setup  # the grader from the source copy inside the zip


def test_setup_makes_hidden_tests_and_solutions_readable_by_root_only(tree):
    for folder in ("solutions", "tests/hidden"):
        path = tree / "source" / folder
        assert stat.S_IMODE(path.stat().st_mode) == 0o700 and path.stat().st_uid == 0
        assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in path.glob("*.py"))
    assert stat.S_IMODE((tree / "source" / "tests" / "public").stat().st_mode) & 0o005


def test_reference_solutions_get_full_points_as_an_unprivileged_uid(tree, python, tmp_path):
    code, results = run_autograder(
        tree,
        python,
        solutions_copy(tmp_path / "sub"),
        metadata={"created_at": "2026-10-01T20:00:00-07:00", "assignment": {"due_date": DUE}},
    )
    assert code == 0
    extra = results["extra_data"]
    assert results["score"] == extra["canary"]["max_score"] > 0 and extra["late"] is None
    assert (
        extra["canary"]["cached"] is True
    )  # proven once, by setup.sh, not again for this submission
    assert all(t["status"] == "passed" and t["score"] == t["max_score"] for t in results["tests"])
    assert extra["isolation"]["backend"] == "process" and extra["isolation"]["seccomp"] is True
    if os.geteuid() == 0:
        assert extra["isolation"]["uid"] >= 60000  # the leased uid, never root
    # the worker started while the grader imported torch graded it: before 0.4.16 it could not write
    # the files of its setup frame (a leased uid, a read-only Landlock view) and a cold one followed
    assert extra["isolation"]["worker_starts"] == 1 and extra["isolation"]["worker_forks"] == 0
    assert results["stdout_visibility"] == "hidden" and results["output_format"] == "md"
    assert {t["visibility"] for t in results["tests"]} == {"after_published"}
    assert {t["output_format"] for t in results["tests"]} == {"md"}
    assert (
        isinstance(extra["seed"], int)
        and extra["grader"]["version"]
        and results["execution_time"] > 0
    )


def test_stubs_get_zero(tree, python):
    code, results = run_autograder(tree, python, ROOT / "exercises")
    assert code == 0 and results["score"] == 0 and results["tests"]
    assert all(t["status"] == "failed" for t in results["tests"])


def test_the_late_policy_uses_gradescopes_submission_time(tree, python, tmp_path):
    """25 h after the due date, 60 min grace: one started day late, 10 % of the earned score."""
    _, results = run_autograder(
        tree,
        python,
        solutions_copy(tmp_path / "sub"),
        metadata={
            "created_at": "2026-10-03T00:59:00-07:00",
            "assignment": {"due_date": DUE, "late_due_date": None},
        },
    )
    full = results["extra_data"]["score_before_late_policy"]
    assert results["extra_data"]["late"]["days_late"] == 1
    assert results["score"] == pytest.approx(full * 0.9) and "Late by 1 day" in results["output"]


def test_the_students_code_cannot_read_the_hidden_tests(tree, python):
    """Security: as root, the `process` sandbox ran student code as root, which read the hidden tests."""
    hidden = tree / "source" / "tests" / "hidden" / "test_softmax.py"
    spy = (
        ROOT / "solutions" / "softmax.py"
    ).read_text() + f"\nSECRET = open({str(hidden)!r}).read()\n"
    _, results = run_autograder(tree, python, {"softmax.py": spy})
    softmax = [t for t in results["tests"] if t["tags"] == ["softmax"]]
    assert softmax and all(
        t["status"] == "failed" and "Permission denied" in t["output"] for t in softmax
    )


def _run_broken(broken: Path, python: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    results = broken / "results" / "results.json"
    results.parent.mkdir(exist_ok=True)
    results.write_text('{"score": 100}')  # an earlier run's: it must not stand for this one
    env = {
        **os.environ,
        "GRADER_AUTOGRADER_ROOT": str(broken),
        "GRADER_PYTHON": python,
        "GRADER_CACHE_DIR": str(broken / "cache"),
    }
    done = subprocess.run(
        ["bash", str(broken / "source" / "run_autograder")], capture_output=True, text=True, env=env
    )
    return done, results


def test_a_grader_failure_is_gradescopes_failure_state_not_a_zero(tree, tmp_path):
    """Gradescope's contract (its autograder docs, "Troubleshooting"): no valid results.json is "The autograder
    failed to execute correctly", a state the instructor sees and reruns. A results.json of 0 was a grade, and
    told the student "your instructor has been told" while nothing told anyone."""
    broken = tmp_path / "autograder"
    shutil.copytree(tree / "source", broken / "source")
    (broken / "source" / "assignments.json").write_text("{not json")
    (broken / "submission").mkdir()
    done, results = _run_broken(broken, sys.executable)
    assert done.returncode == 1 and not results.exists()
    assert (
        "ManifestError" in done.stdout and "GRADER FAILED, not the submission" in done.stdout
    )  # the instructor's view
    assert "no results.json" in done.stdout and "rerun" in done.stdout
    # the interpreter itself missing: run_autograder's own path, the same failure state
    done, results = _run_broken(broken, str(tmp_path / "no-such-python"))
    assert done.returncode != 0 and not results.exists() and "GRADER FAILED" in done.stdout
    script = (
        (broken / "source" / "run_autograder").read_text()
        + (ROOT / "grader" / "release").joinpath("gradescope_run.py").read_text()
        + (ROOT / "grader" / "exports" / "gradescope.py").read_text()
    )
    assert (
        "has been told" not in script and "not your grade" not in script
    )  # nothing claims what nobody did


def _repository(folder: Path) -> Path:
    """A student's repository as Gradescope clones it: exercises/, and the folders their tools made."""
    (folder / "exercises").mkdir(parents=True)
    shutil.copy(ROOT / "solutions" / "softmax.py", folder / "exercises")
    (folder / ".venv" / "bin").mkdir(parents=True)
    (folder / ".venv" / "bin" / "python").symlink_to(sys.executable)
    (folder / ".venv" / "lib64").symlink_to("lib")
    for tool in (".git", "__pycache__", ".pytest_cache", "exercises/.ipynb_checkpoints"):
        (folder / tool).mkdir(parents=True)
        (folder / tool / "HEAD").symlink_to("/etc/hostname")
    return folder


def _upload(shape: str, folder: Path) -> Path:
    """What /autograder/submission holds when a student uploads their softmax.py in ``shape``."""
    folder.mkdir()
    source = (ROOT / "solutions" / "softmax.py").read_bytes()
    if shape == "a zip of the files":
        with zipfile.ZipFile(folder / "submission.zip", "w") as zf:
            zf.writestr("softmax.py", source)
    elif shape == "a zip of a folder":
        with zipfile.ZipFile(folder / "attention-hw.zip", "w") as zf:
            zf.writestr("attention-hw/softmax.py", source)
    elif shape == "a folder one level down":  # a zipped folder, as Gradescope extracts it
        (folder / "attention-hw").mkdir()
        (folder / "attention-hw" / "softmax.py").write_bytes(source)
    else:
        _repository(folder)
    return folder


@pytest.mark.parametrize(
    "shape",
    [
        "a zip of the files",
        "a zip of a folder",
        "a folder one level down",
        "a repository with its tools' folders",
    ],
)
def test_every_shape_a_student_uploads_is_graded(tree, python, tmp_path, shape):
    """README: "files, a zip or a repository". A zip, or a zipped folder one level down, gave "no Python files
    found" (0 points); a repository's .venv links refused it. softmax.py alone: its 6 points, nothing else."""
    code, results = run_autograder(tree, python, _upload(shape, tmp_path / "upload"))
    assert code == 0 and "intake_error" not in results["extra_data"], results["output"]
    softmax = [t for t in results["tests"] if t["tags"] == ["softmax"]]
    assert softmax and all(t["status"] == "passed" for t in softmax) and results["score"] == 6


def test_late_policy_rules():
    rules = {"per_day": 0.25, "max_fraction": 0.6}
    meta = {
        "created_at": "2026-10-03T10:00:00+00:00",
        "assignment": {"due_date": "2026-10-01T12:00:00+00:00"},
    }
    assert late.assess(80.0, rules, meta)["days_late"] == 2
    assert late.assess(80.0, rules, meta)["score"] == 40.0  # 50 % after two days
    meta["created_at"] = "2026-10-09T10:00:00+00:00"
    assert late.assess(80.0, rules, meta)["score"] == 32.0  # capped at 60 %
    assert (
        late.assess(
            80.0,
            rules,
            {"created_at": "2026-09-30T10:00:00+00:00", "assignment": meta["assignment"]},
        )
        is None
    )
    assert late.assess(80.0, None, meta) is None and late.assess(80.0, rules, {}) is None


def test_student_messages_stay_inside_a_code_fence():
    hostile = "```\n![x](https://evil.invalid/t.png) <img src=x onerror=alert(1)>\n````"
    block = gradescope_results.fence(hostile)
    opening = block.split("text\n")[0]
    assert len(opening) == 5 and block.endswith("\n" + opening) and hostile in block
