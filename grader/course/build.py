"""``grader build``: regenerate ``exercises/`` from ``solutions/`` with nbgrader's ClearSolutions.

Signatures, docstrings and shape comments stay; each ``### BEGIN SOLUTION`` … ``### END SOLUTION``
region becomes ``raise NotImplementedError(...)`` naming the task. nbgrader is imported here only
(about 2.3 s), never on a grading or student path.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from grader.course.manifest import REPO_ROOT

PLACEHOLDER = "__GRADER_TASK__"
PACKAGE_DOC = (
    '"""Your exercises: one module per exercise. Run `grader check` or `pytest tests/public`."""\n'
)
HEADER = (
    "# Generated from solutions/{name} by `grader build`. Your task: replace each\n"
    "# `raise NotImplementedError(...)` with working code. Keep the names and signatures.\n"
)


def clear_solutions(source: str) -> str:
    """Return ``source`` with every solution region replaced by a ``NotImplementedError`` stub."""
    import nbformat
    from nbgrader.preprocessors import ClearSolutions

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "language": "python",
        "display_name": "Python 3",
    }
    nb.cells.append(nbformat.v4.new_code_cell(source))
    stub = f'raise NotImplementedError("{PLACEHOLDER}")'
    cleared, _ = ClearSolutions(enforce_metadata=False, code_stub={"python": stub}).preprocess(
        nb, {}
    )
    source_out: str = cleared.cells[0].source  # nbgrader is untyped
    return source_out


def _name_tasks(source: str, module: str) -> str:
    """Replace each placeholder with the task it stands for (the enclosing class.function)."""
    lines = source.splitlines(keepends=True)
    for node, qualname in _functions(ast.parse(source)):
        for lineno in range(node.lineno - 1, node.end_lineno or node.lineno):
            if PLACEHOLDER in lines[lineno]:
                task = f"TODO: implement {qualname} in {module}.py"
                lines[lineno] = lines[lineno].replace(PLACEHOLDER, task)
    out = "".join(lines)
    if PLACEHOLDER in out:
        raise ValueError(f"{module}.py: a solution region outside any function")
    return out


def _functions(
    tree: ast.AST, prefix: str = ""
) -> list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str]]:
    found: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str]] = []
    for node in getattr(tree, "body", []):
        if isinstance(node, ast.ClassDef):
            found += _functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append((node, f"{prefix}{node.name}"))
    return found


def build_file(path: Path) -> str:
    source = path.read_text("utf-8")
    if not re.search(r"^\s*### BEGIN SOLUTION", source, re.MULTILINE):
        return source
    return HEADER.format(name=path.name) + _name_tasks(clear_solutions(source), path.stem)


def build(*, solutions: Path | None = None, out: Path | None = None) -> list[Path]:
    """Write the stub of every ``solutions/*.py`` into ``out``; return the files written."""
    solutions = solutions or REPO_ROOT / "solutions"
    out = out or REPO_ROOT / "exercises"
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for path in sorted(solutions.glob("*.py")):
        target = out / path.name
        target.write_text(PACKAGE_DOC if path.name == "__init__.py" else build_file(path), "utf-8")
        written.append(target)
    return written
