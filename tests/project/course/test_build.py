"""`grader build`: committed exercises/ equals a fresh build; stubs keep signatures, shape scaffolds and name their task."""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize

from grader.course import build
from tests.project.support.common import ROOT

# what a solution does when it changes a tensor's shape (reshape, transpose, broadcast with None, concatenate)
RESHAPES = re.compile(r"\.(view|reshape|transpose|permute)\(|torch\.cat\(|\[None|None\]")
SHAPE_COMMENT = re.compile(r"\((B|\.\.\.),")  # `(B, T, d_out)`, `(B,)`, `(..., L, S)`


def test_committed_exercises_match_a_fresh_build(tmp_path):
    written = build.build(out=tmp_path)
    assert written
    for path in written:
        committed = ROOT / "exercises" / path.name
        assert committed.is_file(), f"exercises/{path.name} missing: run `grader build`"
        assert committed.read_text() == path.read_text(), (
            f"exercises/{path.name} is stale: run `grader build`"
        )
    assert {p.name for p in (ROOT / "exercises").glob("*.py")} == {p.name for p in written}


def test_stubs_keep_signatures_and_docstrings_and_drop_solution_text():
    for solution in (ROOT / "solutions").glob("*.py"):
        stub = ROOT / "exercises" / solution.name
        if solution.name == "__init__.py":
            continue
        sol_defs = _signatures(solution.read_text())
        assert _signatures(stub.read_text()) == sol_defs, solution.name
        text = stub.read_text()
        assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text
        assert 'raise NotImplementedError("TODO: implement' in text


def test_region_lines_never_reach_the_stubs():
    for solution in (ROOT / "solutions").glob("*.py"):
        stub_text = (ROOT / "exercises" / solution.name).read_text()
        for region in _regions(solution.read_text()):
            for line in region:
                if (
                    len(line.strip()) > 12
                ):  # short lines like `return out` may legitimately appear elsewhere
                    assert line.strip() not in stub_text, (
                        f"{solution.name}: leaked {line.strip()!r}"
                    )


def test_solutions_hold_only_the_exercise_modules_of_the_manifest():
    """Nothing but exercises in solutions/: the instructor's self-check lives in grader/selfcheck.py."""
    spec = json.loads((ROOT / "assignments.json").read_text())
    modules = {e["module"] for a in spec["assignments"] for e in a["exercises"]}
    present = {p.name for p in (ROOT / "solutions").iterdir() if p.name != "__pycache__"}
    assert present == {f"{m}.py" for m in modules} | {"__init__.py"}


def test_stubs_of_reshaping_code_carry_shape_scaffolds():
    """Each function whose solution reshapes keeps a `# queries: (B, H, T, hd)` comment outside its region."""
    reshaping = []
    for solution in sorted((ROOT / "solutions").glob("*.py")):
        source = solution.read_text()
        inside = _region_lines(source)
        for name, (first, last) in _functions(source).items():
            lines = source.splitlines()[first - 1 : last]
            if RESHAPES.search(
                "\n".join(line for n, line in enumerate(lines, first) if n in inside)
            ):
                reshaping.append((solution.stem, name))
    assert {m for m, _ in reshaping} >= {
        "multihead_attention",
        "efficient_attention",
        "cross_attention",
        "decaying_attention",
    }
    missing = [
        f"{m}.{name}"
        for m, name in reshaping
        if not any(
            SHAPE_COMMENT.search(c)
            for c in _comments((ROOT / "exercises" / f"{m}.py").read_text(), name)
        )
    ]
    assert missing == []


def _functions(source: str) -> dict[str, tuple[int, int]]:
    """Top-level functions and methods: qualified name -> (first line, last line), 1-based."""
    out = {}
    for node in ast.parse(source).body:
        prefix, body = (
            (f"{node.name}.", node.body) if isinstance(node, ast.ClassDef) else ("", [node])
        )
        for fn in body:
            if isinstance(fn, ast.FunctionDef):
                out[prefix + fn.name] = (fn.lineno, fn.end_lineno or fn.lineno)
    return out


def _region_lines(source: str) -> set[int]:
    """Line numbers (1-based) strictly inside a solution region."""
    inside, found = False, set()
    for n, line in enumerate(source.splitlines(), 1):
        if line.strip() in ("### BEGIN SOLUTION", "### END SOLUTION"):
            inside = line.strip() == "### BEGIN SOLUTION"
        elif inside:
            found.add(n)
    return found


def _comments(source: str, name: str) -> list[str]:
    """The comments inside function (or method) ``name`` of ``source``."""
    first, last = _functions(source)[name]
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return [t.string for t in tokens if t.type == tokenize.COMMENT and first <= t.start[0] <= last]


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
