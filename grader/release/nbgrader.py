"""``grader release --nbgrader COURSE_DIR``: an nbgrader course with one notebook per exercise.

``COURSE_DIR/source/<assignment>/<exercise>.ipynb`` holds, in order: a markdown cell from the module
docstring; a solution cell per exercise module it needs (the reference source with its
``### BEGIN SOLUTION`` regions, which ``nbgrader generate_assignment`` clears); a locked setup
cell; and one autograder cell (``grade: true``, the test's points) per public test, which runs the
test against the names the notebook defines (:mod:`grader.check.nbruntime`). The assignment
folder also gets ``tests/public/`` and a copy of the grader runtime, so the kernel needs only torch
and pytest; ``COURSE_DIR/nbgrader_config.py`` is minimal.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from grader.course import manifest
from grader.release import repository as release
from grader.release import texts

if TYPE_CHECKING:  # nbformat is imported where used (only `grader release --nbgrader` needs it)
    from nbformat import NotebookNode

COURSE_ID = "attention"
KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}


def write_course(
    course: Path, *, assignment: manifest.Assignment, force: bool = False
) -> list[Path]:
    """Write the nbgrader ``source/<assignment>`` tree and config into ``course``; return the files
    written."""
    import nbformat

    root = assignment.root
    release.prepare(course, force=force, marker="nbgrader_config.py")
    folder = course / "source" / assignment.id
    written = [
        release.write_file(
            course / "nbgrader_config.py",
            texts.NBGRADER_CONFIG.substitute(course=COURSE_ID, assignment=assignment.id),
        )
    ]
    written += release.copy_public_tests(assignment, folder) + release.copy_runtime(
        folder / "grader"
    )
    for exercise in assignment.exercises:
        path = folder / f"{exercise.module}.ipynb"
        nbformat.write(notebook(exercise, root), str(path))
        written.append(path)
    return written


def notebook(exercise: manifest.Exercise, root: Path) -> NotebookNode:
    """The source notebook of one exercise (an ``nbformat`` v4 node)."""
    import nbformat.v4 as v4

    solutions = root / "solutions"
    source = (solutions / f"{exercise.module}.py").read_text("utf-8")
    cells = [v4.new_markdown_cell(f"# {exercise.title}\n\n{docstring(source)}")]
    for dep in dependencies(exercise.module, solutions):
        cells.append(
            v4.new_markdown_cell(
                f"This exercise uses your `{dep}` code: paste your solution from "
                f"`{dep}.ipynb` into the next cell."
            )
        )
        cells.append(_cell(v4, code(dep, solutions), f"{exercise.id}-uses-{dep}", solution=True))
    cells.append(
        _cell(v4, code(exercise.module, solutions), f"{exercise.id}-solution", solution=True)
    )
    test_file = root / exercise.public_tests
    cells.append(
        v4.new_markdown_cell(
            "## Public tests\n\nRun the cells below to check your work. These are the "
            "public tests only: hidden tests decide the grade."
        )
    )
    cells.append(_cell(v4, setup_source(exercise), f"{exercise.id}-public-setup", locked=True))
    for name, points, body in tests(test_file):
        cells.append(
            _cell(
                v4,
                f"@public_test\n{body}",
                f"{exercise.id}-{name}".replace("_", "-"),
                locked=True,
                points=points,
            )
        )
    nb: NotebookNode = v4.new_notebook(cells=cells)  # nbformat leaves its constructors unannotated
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def _cell(
    v4: ModuleType,
    source: str,
    grade_id: str,
    *,
    solution: bool = False,
    locked: bool = False,
    points: float | None = None,
) -> NotebookNode:
    meta: dict[str, Any] = {
        "grade": points is not None,
        "grade_id": grade_id,
        "locked": locked,
        "schema_version": 3,
        "solution": solution,
        "task": False,
    }
    if points is not None:
        meta["points"] = points
    cell: NotebookNode = v4.new_code_cell(source, metadata={"nbgrader": meta})
    return cell


def docstring(source: str) -> str:
    return ast.get_docstring(ast.parse(source)) or ""


def code(module: str, solutions: Path) -> str:
    """The module's source without its docstring and its relative imports (the notebook defines
    those names)."""
    source = (solutions / f"{module}.py").read_text("utf-8")
    tree = ast.parse(source)
    drop: set[int] = set()
    for node in tree.body:
        if (
            isinstance(node, ast.Expr)
            and node is tree.body[0]
            and isinstance(node.value, ast.Constant)
        ) or (isinstance(node, ast.ImportFrom) and node.level > 0):
            drop.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    lines = [line for i, line in enumerate(source.splitlines(), 1) if i not in drop]
    return re.sub(r"\n{4,}", "\n\n\n", "\n".join(lines)).strip() + "\n"


def dependencies(module: str, solutions: Path, seen: tuple[str, ...] = ()) -> list[str]:
    """Modules that ``module`` imports relatively (``from .causal_attention import ...``), deepest
    first."""
    found: list[str] = []
    tree = ast.parse((solutions / f"{module}.py").read_text("utf-8"))
    for node in tree.body:
        if (
            isinstance(node, ast.ImportFrom)
            and node.level == 1
            and node.module
            and node.module not in seen
        ):
            for dep in [*dependencies(node.module, solutions, (*seen, module)), node.module]:
                if dep not in found:
                    found.append(dep)
    return found


def setup_source(exercise: manifest.Exercise) -> str:
    return (
        "# Public tests: each cell below runs one test against the names this notebook defines.\n"
        "from grader.check.nbruntime import public_tests\n\n"
        f'public_test = public_tests(globals(), "{exercise.public_tests}")\n'
    )


def tests(test_file: Path) -> list[tuple[str, float, str]]:
    """(name, points, source without decorators) of each top-level test function (CUDA tests left
    out)."""
    source = test_file.read_text("utf-8")
    lines = source.splitlines()
    out = []
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")):
            continue
        marks = {_mark(d): d for d in node.decorator_list}
        if "cuda" in marks or "points" not in marks:
            continue
        points = float(ast.literal_eval(marks["points"].args[0]))  # type: ignore[attr-defined]
        body = "\n".join(lines[node.lineno - 1 : node.end_lineno])
        out.append((node.name, points, body + "\n"))
    return out


def _mark(decorator: ast.expr) -> str:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return target.attr if isinstance(target, ast.Attribute) else ""
