"""`grader release --nbgrader`: source notebooks that real `nbgrader generate_assignment` accepts, with no
solution text in what it releases, and test cells that pass on the solutions and explain the stubs; then the
round trip: released notebooks filled by a student, in nbgrader's `submitted/`, graded by `grader batch`
(100 filled, 0 untouched) and still by `nbgrader autograde`."""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from grader.cli.main import main
from grader.course import manifest
from tests.project.release.test_classroom_release import leaks
from tests.project.support.common import ROOT

pytestmark = pytest.mark.cost(50)  # seconds on 2 cores: started early (tests/project/conftest.py)

ASSIGNMENT = "attention-basics"


def _nbgrader(course: Path, *args: str) -> None:
    t0 = time.monotonic()
    # nbgrader runs `alembic` from PATH: put this interpreter's scripts first, as an activated venv would
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    done = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args],
        cwd=course,
        capture_output=True,
        text=True,
        timeout=480,
        env=env,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    print(f"nbgrader {args[0]}: {time.monotonic() - t0:.1f} s")


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    course = tmp_path_factory.mktemp("nbgrader") / "course"
    assert main(["release", "--nbgrader", str(course)]) == 0
    _nbgrader(course, "generate_assignment", ASSIGNMENT)
    return course


def _meta(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


def test_source_notebooks_carry_solution_regions_and_graded_public_tests(course):
    spec = manifest.load()
    total = 0.0
    for exercise in spec.exercises:
        nb = nbformat.read(course / "source" / ASSIGNMENT / f"{exercise.module}.ipynb", 4)
        assert nb.cells[0].cell_type == "markdown" and exercise.title in nb.cells[0].source
        solution = [c for c in nb.cells if _meta(c).get("solution")]
        assert solution and all("### BEGIN SOLUTION" in c.source for c in solution)
        graded = [c for c in nb.cells if _meta(c).get("grade")]
        assert graded and all(_meta(c)["locked"] and "@public_test" in c.source for c in graded)
        assert sum(_meta(c)["points"] for c in graded) == exercise.points
        total += exercise.points
    assert total == 100


def test_generate_assignment_releases_every_notebook_without_solution_text(course):
    released = course / "release" / ASSIGNMENT
    names = {p.name for p in released.glob("*.ipynb")}
    assert names == {f"{e.module}.ipynb" for e in manifest.load().exercises}
    assert not list(released.rglob("solutions")) and not (released / "tests" / "hidden").exists()
    assert leaks(released) == []
    nb = nbformat.read(released / "multihead_attention.ipynb", 4)
    stubs = [c.source for c in nb.cells if _meta(c).get("solution")]
    assert len(stubs) == 2 and all(
        "raise NotImplementedError()" in s for s in stubs
    )  # CausalAttention, then MHA


def _execute(path: Path) -> list[tuple[str, str]]:
    from nbclient import NotebookClient

    nb = nbformat.read(path, 4)
    NotebookClient(
        nb,
        timeout=120,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(path.parent)}},
    ).execute()
    return [
        (_meta(c).get("grade_id", "?"), o.get("evalue", ""))
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if o.output_type == "error"
    ]


@pytest.mark.slow
def test_test_cells_pass_on_the_source_and_say_not_implemented_on_the_release(course):
    assert _execute(course / "source" / ASSIGNMENT / "softmax.ipynb") == []
    errors = _execute(course / "release" / ASSIGNMENT / "softmax.ipynb")
    assert [e[0] for e in errors] == [
        "softmax-test-naive-softmax-gives-the-books-weights",
        "softmax-test-naive-softmax-of-a-batch-of-rows",
        "softmax-test-stable-softmax-gives-the-books-weights-and-batches",
        "softmax-test-stable-softmax-survives-large-inputs",
        "softmax-test-gradients-flow-through-both",
    ]
    assert all("is not implemented yet" in message for _, message in errors)


def test_the_notebook_runtime_finds_names_and_reports_missing_ones():
    import types

    from grader.check import nbruntime

    public_test = nbruntime.public_tests({}, ROOT / "tests" / "public" / "test_softmax.py")
    module = nbruntime.load_tests(ROOT / "tests" / "public" / "test_softmax.py")
    with pytest.raises(AssertionError, match="`softmax_naive` is not defined in this notebook"):
        public_test(module.test_naive_softmax_gives_the_books_weights)
    source = (ROOT / "solutions" / "softmax.py").read_text()
    names: dict = {}
    exec(compile(source, "<notebook cell>", "exec"), names)
    nbruntime.public_tests(names, ROOT / "tests" / "public" / "test_softmax.py")(
        module.test_stable_softmax_survives_large_inputs
    )
    assert isinstance(module, types.ModuleType)


# --- the round trip: a student fills the released notebooks, nbgrader collects them, we grade them ---------

_STUB = re.compile(r"^[ \t]*# YOUR CODE HERE\n[ \t]*raise NotImplementedError\(\)\n?", re.M)


def _regions(module: str) -> list[str]:
    """The reference's solution regions, in order, without their marker lines."""
    regions, current = [], None
    for line in (ROOT / "solutions" / f"{module}.py").read_text("utf-8").splitlines(keepends=True):
        if line.strip() == "### BEGIN SOLUTION":
            current = []
        elif line.strip() == "### END SOLUTION":
            regions.append("".join(current or []))
            current = None
        elif current is not None:
            current.append(line)
    return regions


def _fill(path: Path) -> None:
    """What a student does: write each solution region where nbgrader left `# YOUR CODE HERE`."""
    nb = nbformat.read(path, 4)
    for cell in (c for c in nb.cells if _meta(c).get("solution")):
        grade_id = _meta(cell)["grade_id"]
        module = grade_id.split("-uses-")[1] if "-uses-" in grade_id else path.stem
        regions = iter(_regions(module))
        cell.source, count = _STUB.subn(lambda _, regions=regions: next(regions), cell.source)
        assert count == len(_regions(module)), grade_id
    nb.cells.append(
        nbformat.v4.new_code_cell(
            "NEG_INF = float('-inf')  # a computed constant, kept\n"
            "x = torch.randn(2, 3)\nprint(x.shape)\n"
        )
    )
    nbformat.write(nb, str(path))


@pytest.fixture(scope="module")
def submitted(course) -> Path:
    """nbgrader's `submitted/<student>/<assignment>/`: alice filled every notebook, bob handed in the release."""
    for student, filled in (("alice", True), ("bob", False)):
        folder = course / "submitted" / student / ASSIGNMENT
        shutil.copytree(course / "release" / ASSIGNMENT, folder)
        (folder / "timestamp.txt").write_text("2026-09-01 10:00:00.000000 UTC\n")
        for path in folder.glob("*.ipynb") if filled else ():
            _fill(path)
    return course / "submitted"


@pytest.mark.slow
def test_grader_batch_gives_100_to_the_filled_notebooks_and_0_to_the_untouched_ones(
    submitted, tmp_path
):
    out = tmp_path / "out"
    t0 = time.monotonic()
    assert (
        main(["batch", str(submitted), "--out", str(out), "-j", "2", "--seed", "3", "--quiet"]) == 0
    )
    print(f"grader batch (2 notebook submissions, all exercises): {time.monotonic() - t0:.1f} s")
    rows = {r["student"]: r for r in csv.DictReader((out / "gradebook.csv").open())}
    assert (float(rows["alice"]["total"]), float(rows["bob"]["total"])) == (100, 0)
    assert rows["alice"]["status"] == rows["bob"]["status"] == "graded"
    alice = (out / "scorecards" / "alice.json").read_text()
    assert "NameError" not in alice and '"layout": "directory"' in alice


@pytest.mark.slow
def test_nbgrader_autograde_still_grades_the_filled_notebooks(submitted):
    from nbgrader.api import Gradebook

    course = submitted.parent
    _nbgrader(course, "autograde", ASSIGNMENT, "--student", "alice")
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        submission = gradebook.find_submission(ASSIGNMENT, "alice")
        assert (submission.score, submission.max_score) == (100, 100)
