"""Mutants of the reference solutions that the hidden suites do not catch: where a suite may have a gap.

Each mutant changes one thing inside a module's ``### BEGIN SOLUTION`` region: an arithmetic operator, a
comparison, a number, a sign, a reduction or function (max/min, sum/mean, tril/triu, ...), a ``keepdim``, or a
reassignment ``x = f(x)`` dropped. It replaces its module in the reference solutions, and its exercise's hidden
suite runs in this process on one seed. A mutant that keeps full marks survives: it is either equivalent under the
exercise's spec (``x.shape[2]`` for ``x.shape[-2]`` where the spec's inputs are always 4-D) or a gap to close with
a test and a corpus bug. The survivors are printed with their diffs, to read. A few minutes per assignment.

    python benchmarks/mutants.py [--assignment ID] [--exercise ID ...] [--seed 7] [--json]
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(
    0, str(ROOT)
)  # the project's test helpers (tests.project.conftest) copy the solutions

from grader.course import manifest  # noqa: E402
from grader.scoring.points import exercise_scores  # noqa: E402
from grader.scoring.runner import run_suites  # noqa: E402

BINARY = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult}
COMPARE = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
}
NAMES = {
    "maximum": "minimum",
    "minimum": "maximum",
    "amax": "amin",
    "amin": "amax",
    "sum": "mean",
    "mean": "sum",
    "tril": "triu",
    "triu": "tril",
    "softmax": "log_softmax",
    "cumsum": "cumprod",
    "sqrt": "rsqrt",
}
Mutation = Callable[
    [ast.AST, ast.AST], str
]  # (node, its parent) -> a label; mutates the tree in place


def solution_lines(source: str) -> set[int]:
    """The line numbers strictly between each ``BEGIN SOLUTION`` and its ``END SOLUTION``."""
    lines, start = set(), None
    for number, line in enumerate(source.splitlines(), 1):
        if "BEGIN SOLUTION" in line:
            start = number
        elif "END SOLUTION" in line and start is not None:
            lines.update(range(start + 1, number))
            start = None
    return lines


def _replace(parent: ast.AST, old: ast.AST, new: ast.AST | None) -> None:
    """Put ``new`` where ``old`` is among ``parent``'s fields (``None``: remove it from its list)."""
    for field, value in ast.iter_fields(parent):
        if value is old:
            setattr(parent, field, new)
        elif isinstance(value, list) and any(v is old for v in value):
            setattr(
                parent,
                field,
                [new if v is old else v for v in value if v is not old or new is not None],
            )


def mutations(node: ast.AST) -> list[Mutation]:
    """The mutations that apply to ``node``."""
    found: list[Mutation] = []
    if isinstance(node, ast.BinOp) and type(node.op) in BINARY:
        found.append(lambda n, p: f"{type(n.op).__name__} -> {_set(n, 'op', BINARY[type(n.op)]())}")
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in COMPARE:
        found.append(
            lambda n, p: (
                f"{type(n.ops[0]).__name__} -> {_set(n, 'ops', [COMPARE[type(n.ops[0])]()])}"
            )
        )
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        found.append(lambda n, p: f"{n.value!r} -> {_set(n, 'value', n.value + 1)!r}")
        if node.value != 0:
            found.append(lambda n, p: f"{n.value!r} -> {_set(n, 'value', type(n.value)(0))!r}")
    if isinstance(node, ast.Constant) and type(node.value) is bool:
        found.append(lambda n, p: f"{n.value!r} -> {_set(n, 'value', not n.value)!r}")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        found.append(
            lambda n, p: f"sign dropped: {_replace(p, n, n.operand) or ast.unparse(n.operand)}"
        )
    if isinstance(node, ast.Attribute) and node.attr in NAMES:
        found.append(lambda n, p: f"{n.attr} -> {_set(n, 'attr', NAMES[n.attr])}")
    if isinstance(node, ast.keyword) and node.arg == "keepdim":
        found.append(lambda n, p: f"keepdim dropped{_replace(p, n, None) or ''}")
    if _reassigns(node):
        found.append(
            lambda n, p: f"step dropped: {ast.unparse(n)[:60]}{_replace(p, n, ast.Pass()) or ''}"
        )
    return found


def _set(node: ast.AST, field: str, value: object) -> object:
    """Set ``node.field``; return what the label shows (an operator by its class name)."""
    setattr(node, field, value)
    shown = value[0] if isinstance(value, list) else value
    return type(shown).__name__ if isinstance(shown, ast.AST) else shown


def _reassigns(node: ast.AST) -> bool:
    """``x = f(x)`` or ``x += ...``: dropping it leaves ``x`` defined (a forgotten step, not a NameError)."""
    if isinstance(node, ast.AugAssign):
        return isinstance(node.target, ast.Name)
    if (
        isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
    ):
        name = node.targets[0].id
        return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node.value))
    return False


def _sites(tree: ast.AST, lines: set[int]) -> Iterator[tuple[ast.AST, ast.AST, Mutation]]:
    """(node, parent, mutation) in a fixed order, for the nodes on ``lines``."""
    for parent in ast.walk(tree):
        for node in ast.iter_child_nodes(parent):
            if getattr(node, "lineno", None) in lines:
                for mutation in mutations(node):
                    yield node, parent, mutation


def mutants(source: str) -> Iterator[tuple[str, str]]:
    """(label, mutated source) for every mutation site inside the solution regions."""
    lines = solution_lines(source)
    count = sum(1 for _ in _sites(ast.parse(source), lines))
    for index in range(count):
        tree = ast.parse(source)
        node, parent, mutation = next(s for i, s in enumerate(_sites(tree, lines)) if i == index)
        line = getattr(node, "lineno", 0)
        label = mutation(node, parent)
        yield f"line {line}: {label}", ast.unparse(ast.fix_missing_locations(tree))


def survivors(
    spec: manifest.Assignment, exercise: manifest.Exercise, seed: int
) -> tuple[int, list[dict]]:
    """(mutants tried, the ones that kept full marks on the hidden suite, with their diffs)."""
    from tests.project.support.common import solutions_copy

    source = (ROOT / "solutions" / f"{exercise.module}.py").read_text(encoding="utf-8")
    plain = ast.unparse(
        ast.parse(source)
    ).splitlines()  # the diff compares like with like (ast.unparse's layout)
    tried, kept = 0, []
    with tempfile.TemporaryDirectory() as tmp:
        for tried, (label, code) in enumerate(mutants(source), 1):
            sub = solutions_copy(Path(tmp) / f"m{tried}")
            (sub / f"{exercise.module}.py").write_text(code, encoding="utf-8")
            results, _ = run_suites(
                [spec.root / exercise.hidden_tests], student=sub, seed=seed, assignment=spec
            )
            score = next(s for s in exercise_scores(results, spec) if s.id == exercise.id)
            if score.score >= score.max_score:
                diff = [
                    d
                    for d in difflib.unified_diff(plain, code.splitlines(), lineterm="", n=0)
                    if d[:1] in "+-" and d[:3] not in ("+++", "---")
                ]
                kept.append({"exercise": exercise.id, "mutant": label, "diff": diff})
    print(f"  {exercise.id}: {tried} mutants, {len(kept)} kept full marks", file=sys.stderr)
    return tried, kept


def main(argv: list[str] | None = None) -> int:
    import torch

    torch.set_num_threads(
        1
    )  # small tensors, many suites: OpenMP's threads only spin (2-5x slower beside other work)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--assignment", help="an assignment's id (default: every assignment of the manifest)"
    )
    p.add_argument("--exercise", action="append", help="only this exercise (repeatable)")
    p.add_argument("--seed", type=int, default=7, help="the grading seed (default 7)")
    p.add_argument("--json", action="store_true", help="print the survivors as JSON")
    args = p.parse_args(argv)
    specs = [manifest.load(assignment=args.assignment)] if args.assignment else manifest.load_all()
    chosen = [
        (s, e) for s in specs for e in s.exercises if not args.exercise or e.id in args.exercise
    ]
    tried, kept = 0, []
    for spec, exercise in chosen:
        n, found = survivors(spec, exercise, args.seed)
        tried, kept = tried + n, kept + found
    if args.json:
        print(json.dumps(kept, indent=1))
        return 0
    print(
        f"{len(chosen)} exercises: {tried} mutants, {len(kept)} kept full marks on the hidden suites"
    )
    for row in kept:
        print(
            f"\n{row['exercise']}, {row['mutant']}\n"
            + "\n".join(line[:150] for line in row["diff"])
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
