"""What an integrity finding costs: the points of every exercise whose code it can reach.

An exercise's code is its module and every submission module that module imports, transitively
(hidden imports are findings themselves). A finding there withholds the exercise's points: the
tests still run and are shown, the score is 0 and the scorecard says why.

A finding anywhere also means the worker's in-process bans cannot be trusted for the rest of the
submission (one tampering module clears them for all). So, only then, the other exercises are
checked statically for the APIs banned in them; an honest module never names its own banned APIs.
"""

from __future__ import annotations

import ast
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader import manifest
from grader.scoring import integrity
from grader.scoring.points import ExerciseScore, withhold


@dataclass
class Review:
    findings: list[integrity.Finding] = field(default_factory=list)
    withheld: dict[str, str] = field(default_factory=dict)  # exercise id -> reason
    seconds: float = 0.0

    def to_list(self) -> list[dict[str, object]]:
        return [f.to_dict() for f in self.findings]


def review(box: Path, assignment: manifest.Assignment, single_module: str | None = None) -> Review:
    """Scan the staged submission and decide which exercises lose their points (nothing runs)."""
    t0 = time.perf_counter()
    findings = integrity.scan_box(box)
    trees = _trees(box)
    graph = {stem: _imports(tree, set(trees)) for stem, tree in trees.items()}
    withheld: dict[str, str] = {}
    for exercise in assignment.exercises:
        reach = _closure(graph, single_module or exercise.module)
        hits = [f for f in findings if Path(f.file).stem in reach]
        if hits:
            withheld[exercise.id] = _reason(hits)
        elif findings:
            used = _banned_uses(exercise, single_module or exercise.module, reach, trees)
            if used:
                withheld[exercise.id] = (f"uses {used}, banned in this exercise, while {findings[0].to_dict()['file']} "
                                         "tampers with the grader (its bans cannot be trusted)")
    return Review(findings, withheld, round(time.perf_counter() - t0, 4))


def apply(scores: list[ExerciseScore], verdict: Review) -> None:
    for score in scores:
        if score.id in verdict.withheld:
            withhold(score, verdict.withheld[score.id])


def annotate(card: dict[str, Any], verdict: Review) -> None:
    """Scorecard fields: ``integrity`` (all findings) and, per withheld exercise, ``withheld`` and 0 points."""
    card["integrity"] = verdict.to_list()
    card["timings"]["integrity_s"] = verdict.seconds
    for entry in card["exercises"]:
        reason = verdict.withheld.get(entry["id"])
        if reason is None:
            continue
        entry.update(withheld=reason, score=0.0)
        for test in entry["tests"]:  # exports sum per-test points: they must not count either
            if test["points"]:
                test["message"] = f"points withheld: {reason}" + (f"\n{test['message']}" if test["message"] else "")
            test["points"] = 0.0
    card["score"] = round(sum(e["score"] for e in card["exercises"]), 6)


def _reason(hits: list[integrity.Finding]) -> str:
    first = hits[0].to_dict()  # sanitised: file names and constructs are the student's text
    more = f" (and {len(hits) - 1} more)" if len(hits) > 1 else ""
    return f"integrity finding: {first['file']} line {first['line']}: {first['construct']} ({first['rule']}){more}"


def _trees(box: Path) -> dict[str, ast.Module]:
    trees = {}
    for path in sorted(box.glob("*.py")):
        try:
            trees[path.stem] = ast.parse(path.read_bytes(), path.name)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue  # reported by the scan (or failing at import in the worker)
    return trees


def _imports(tree: ast.Module, stems: set[str]) -> set[str]:
    """Submission modules a module imports: ``from .x import``, ``from . import x``, ``import x``."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            head = (node.module or "").split(".")[0]
            found |= {head} if head else {a.name for a in node.names}
    return found & stems


def _closure(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for nxt in graph.get(todo.pop(), set()) - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


# -- banned APIs, checked statically once the in-process bans are void ---------------------------
def _banned_uses(exercise: manifest.Exercise, module: str, reach: set[str], trees: dict[str, ast.Module]) -> str:
    """The first banned API the exercise's code names (scoped bans: inside their function), or ''."""
    for stem in sorted(reach & set(trees)):
        tree = trees[stem]
        wide = [_nodes(tree)]
        for api in exercise.banned:
            if _names(api, wide, tree):
                return api
        for scope, apis in exercise.banned_in.items():
            nodes = [_scope_nodes(tree, scope)] if stem == module else wide
            for api in apis:
                if _names(api, nodes, tree):
                    return api
    return ""


def _nodes(tree: ast.Module) -> list[ast.AST]:
    return list(ast.walk(tree))


def _names(api: str, groups: list[list[ast.AST]], tree: ast.Module) -> bool:
    aliases = integrity._aliases(_nodes(tree))
    method = api.removeprefix("torch.Tensor.") if api.startswith("torch.Tensor.") else None
    for node in (n for group in groups for n in group):
        path = integrity._dotted(node, aliases) if isinstance(node, (ast.Name, ast.Attribute)) else None
        if path == api or (path or "").startswith(api + "."):
            return True
        if method and isinstance(node, ast.Attribute) and node.attr == method and path is None:
            return True  # x.softmax(...): a tensor method, whatever x is
    return False


def _scope_nodes(tree: ast.Module, scope: str) -> list[ast.AST]:
    """Nodes that can run while ``scope`` (a module-level function or class) runs: its body, the
    module-level statements, and the module-level definitions it names, transitively."""
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    nodes = [n for stmt in tree.body if stmt not in defs.values() for n in ast.walk(stmt)]
    seen, todo = {scope}, [scope] if scope in defs else []
    while todo:
        body = list(ast.walk(defs[todo.pop()]))
        nodes += body
        for name in {n.id for n in body if isinstance(n, ast.Name)} & set(defs) - seen:
            seen.add(name)
            todo.append(name)
    return nodes
