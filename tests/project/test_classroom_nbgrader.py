"""`grader release --nbgrader`: source notebooks that real `nbgrader generate_assignment` accepts, with no
solution text in what it releases, and test cells that pass on the solutions and explain the stubs."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from grader import manifest
from grader.cli import main
from tests.project.conftest import ROOT
from tests.project.test_classroom_release import leaks

ASSIGNMENT = "attention-basics"


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    course = tmp_path_factory.mktemp("nbgrader") / "course"
    assert main(["release", "--nbgrader", str(course)]) == 0
    t0 = time.monotonic()
    # nbgrader runs `alembic` from PATH: put this interpreter's scripts first, as an activated venv would
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", ASSIGNMENT],
                          cwd=course, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    print(f"nbgrader generate_assignment: {time.monotonic() - t0:.1f} s")
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
    assert len(stubs) == 2 and all("raise NotImplementedError()" in s for s in stubs)  # CausalAttention, then MHA


def _execute(path: Path) -> list[tuple[str, str]]:
    from nbclient import NotebookClient

    nb = nbformat.read(path, 4)
    NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    return [(_meta(c).get("grade_id", "?"), o.get("evalue", "")) for c in nb.cells if c.cell_type == "code"
            for o in c.outputs if o.output_type == "error"]


@pytest.mark.slow
def test_test_cells_pass_on_the_source_and_say_not_implemented_on_the_release(course):
    assert _execute(course / "source" / ASSIGNMENT / "softmax.ipynb") == []
    errors = _execute(course / "release" / ASSIGNMENT / "softmax.ipynb")
    assert [e[0] for e in errors] == ["softmax-test-naive-softmax-gives-the-books-weights",
                                      "softmax-test-stable-softmax-gives-the-books-weights",
                                      "softmax-test-stable-softmax-survives-large-inputs"]
    assert all("is not implemented yet" in message for _, message in errors)


def test_the_notebook_runtime_finds_names_and_reports_missing_ones():
    import types

    from grader.classroom import nbruntime

    public_test = nbruntime.public_tests({}, ROOT / "tests" / "public" / "test_softmax.py")
    module = nbruntime.load_tests(ROOT / "tests" / "public" / "test_softmax.py")
    with pytest.raises(AssertionError, match="`softmax_naive` is not defined in this notebook"):
        public_test(module.test_naive_softmax_gives_the_books_weights)
    source = (ROOT / "solutions" / "softmax.py").read_text()
    names: dict = {}
    exec(compile(source, "<notebook cell>", "exec"), names)  # noqa: S102 - the trusted reference, as a notebook would
    nbruntime.public_tests(names, ROOT / "tests" / "public" / "test_softmax.py")(
        module.test_stable_softmax_survives_large_inputs)
    assert isinstance(module, types.ModuleType)
