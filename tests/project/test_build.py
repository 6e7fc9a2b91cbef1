"""`grader build`: committed exercises/ equals a fresh build; stubs keep signatures and name their task."""

from __future__ import annotations

import ast

from grader import build
from tests.project.conftest import ROOT


def test_committed_exercises_match_a_fresh_build(tmp_path):
    written = build.build(out=tmp_path)
    assert written
    for path in written:
        committed = ROOT / "exercises" / path.name
        assert committed.is_file(), f"exercises/{path.name} missing: run `grader build`"
        assert committed.read_text() == path.read_text(), f"exercises/{path.name} is stale: run `grader build`"
    assert {p.name for p in (ROOT / "exercises").glob("*.py")} == {p.name for p in written}


def test_stubs_keep_signatures_and_docstrings_and_drop_solution_text():
    for solution in (ROOT / "solutions").glob("*.py"):
        stub = ROOT / "exercises" / solution.name
        if solution.name in ("__init__.py", "selfcheck.py"):
            continue
        sol_defs = _signatures(solution.read_text())
        assert _signatures(stub.read_text()) == sol_defs, solution.name
        text = stub.read_text()
        assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text
        assert "raise NotImplementedError(\"TODO: implement" in text


def test_region_lines_never_reach_the_stubs():
    for solution in (ROOT / "solutions").glob("*.py"):
        stub_text = (ROOT / "exercises" / solution.name).read_text() if solution.name != "selfcheck.py" else ""
        for region in _regions(solution.read_text()):
            for line in region:
                if len(line.strip()) > 12:  # short lines like `return out` may legitimately appear elsewhere
                    assert line.strip() not in stub_text, f"{solution.name}: leaked {line.strip()!r}"


def _signatures(source: str) -> dict[str, tuple]:
    """Top-level functions and methods (helpers nested inside a solution region may vanish)."""
    out = {}
    tree = ast.parse(source)
    nodes = [*tree.body, *(n for c in tree.body if isinstance(c, ast.ClassDef) for n in c.body)]
    for node in nodes:
        if isinstance(node, ast.FunctionDef):
            out[node.name] = (ast.dump(node.args), ast.get_docstring(node))
    return out


def _regions(source: str) -> list[list[str]]:
    regions, current = [], None
    for line in source.splitlines():
        if line.strip() == "### BEGIN SOLUTION":
            current = []
        elif line.strip() == "### END SOLUTION":
            regions.append(current or [])
            current = None
        elif current is not None:
            current.append(line)
    return regions
