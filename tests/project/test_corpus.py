"""The hidden suites against known code: solutions score 100, stubs 0, every corpus bug loses points."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.project.conftest import CORPUS, ROOT, grade_inprocess, solutions_copy

BUGS = sorted(CORPUS.glob("buggy/*/*.py"))


@pytest.mark.parametrize("suite", ["hidden", "public"])
def test_reference_solutions_score_full_marks(tmp_path, assignment, suite):
    scores = grade_inprocess(solutions_copy(tmp_path / "sub"), assignment, suite=suite)
    lost = {ex: s for ex, s in scores.items() if s[0] != s[1]}
    assert not lost, f"reference lost points on the {suite} suite: {lost}"
    assert sum(s[1] for s in scores.values()) == pytest.approx(assignment.max_points)


@pytest.mark.parametrize("suite", ["hidden", "public"])
def test_untouched_stubs_score_zero_without_crashing(assignment, suite):
    scores = grade_inprocess(ROOT / "exercises", assignment, suite=suite)
    assert sum(s[0] for s in scores.values()) == 0, scores
    assert sum(s[1] for s in scores.values()) == pytest.approx(assignment.max_points)


@pytest.mark.parametrize("bug", BUGS, ids=[f"{p.parent.name}/{p.stem}" for p in BUGS])
def test_each_corpus_bug_loses_points_on_its_exercise(tmp_path, assignment, bug: Path):
    exercise = assignment.exercise(bug.parent.name)
    sub = solutions_copy(tmp_path / "sub")
    shutil.copy(bug, sub / f"{exercise.module}.py")
    score, max_score = grade_inprocess(sub, assignment, exercises=[exercise.id])[exercise.id]
    assert max_score == exercise.points
    assert score < max_score, f"{bug.name} ({bug.read_text().splitlines()[0]}) kept all {score} points"


def test_corpus_covers_every_exercise(assignment):
    covered = {p.parent.name for p in BUGS}
    assert covered == set(assignment.ids()), f"exercises without buggy implementations: {set(assignment.ids()) - covered}"


def _do_nothing_submission(dest: Path, answer: str) -> Path:
    """Every function returns zeros (or its first tensor input) and every module's forward does the same."""
    import ast

    dest.mkdir(parents=True)
    value = "torch.zeros_like(t[0])" if answer == "zeros" else "t[0]"
    for path in (ROOT / "solutions").glob("*.py"):
        if path.name in ("__init__.py", "selfcheck.py"):
            continue
        lines = ["import torch", "from torch import nn", ""]
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef):
                lines += [f"def {node.name}({ast.unparse(node.args)}):",
                          "    t = [a for a in list(locals().values()) if isinstance(a, torch.Tensor)]",
                          f"    return {value} if t else torch.zeros(1)", ""]
            elif isinstance(node, ast.ClassDef):
                init = next(n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
                lines += [f"class {node.name}(nn.Module):", f"    def __init__({ast.unparse(init.args)}):",
                          "        super().__init__()", "        self.register_buffer('mask', torch.ones(1))",
                          "    def forward(self, x, *a, **k):",
                          f"        return {'torch.zeros_like(x)' if answer == 'zeros' else 'x'}", ""]
        (dest / path.name).write_text("\n".join(lines))
    return dest


@pytest.mark.parametrize("answer", ["zeros", "identity"])
def test_a_do_nothing_submission_scores_zero_everywhere(tmp_path, assignment, answer):
    """Property and structure tests must be anchored to values: a constant answer earns nothing."""
    scores = grade_inprocess(_do_nothing_submission(tmp_path / answer, answer), assignment)
    earned = {ex: s for ex, s in scores.items() if s[0] > 0}
    assert not earned, f"a submission returning {answer} earned points: {earned}"
