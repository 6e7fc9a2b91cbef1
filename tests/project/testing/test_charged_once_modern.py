"""Charged once, in the modern assignment: grouped_query_attention builds on rope.py and kv_cache on both; each is
graded with the grader's stand-ins for what it builds on (grader/inside/standins.py, ``STAND_INS``), so every corpus
bug upstream (even one that breaks the import) loses points on its own exercise and costs nothing downstream.

A file of its own (not test_corpus.py): under ``--dist loadfile`` it runs beside the corpus, not after it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from grader.course import manifest
from tests.project.support.common import CORPUS, grade_inprocess, solutions_copy

pytestmark = pytest.mark.cost(22)  # seconds on 2 cores: started early (tests/project/conftest.py)

MODERN = manifest.load(assignment="attention-modern")
DOWNSTREAM = {
    "rope": ["grouped_query_attention", "kv_cache"],
    "grouped_query_attention": ["kv_cache"],
}
UPSTREAM_BUGS = [(ex, p) for ex in DOWNSTREAM for p in sorted(CORPUS.glob(f"buggy/{ex}/*.py"))]


@pytest.mark.parametrize(
    ("exercise", "bug"), UPSTREAM_BUGS, ids=[f"{e}/{p.stem}" for e, p in UPSTREAM_BUGS]
)
def test_a_modern_upstream_bug_is_charged_once(tmp_path, exercise: str, bug: Path):
    sub = solutions_copy(tmp_path / "sub")
    shutil.copy(bug, sub / f"{exercise}.py")
    scores = grade_inprocess(sub, MODERN, exercises=[exercise, *DOWNSTREAM[exercise]])
    assert scores[exercise][0] < scores[exercise][1], f"{bug.name} kept its {exercise} points"
    lost = {ex: scores[ex] for ex in DOWNSTREAM[exercise] if scores[ex][0] != scores[ex][1]}
    assert not lost, f"{exercise}/{bug.name} cost points downstream: {lost}"


@pytest.mark.parametrize(
    "broken",
    [["rope"], ["grouped_query_attention"], ["rope", "grouped_query_attention"]],
    ids=["rope", "grouped_query_attention", "both"],
)
def test_an_unimportable_upstream_module_costs_nothing_downstream(tmp_path, broken: list[str]):
    sub = solutions_copy(tmp_path / "sub")
    for exercise in broken:
        (sub / f"{exercise}.py").write_text("def half_written(:\n")  # a SyntaxError at import
    downstream = sorted({ex for b in broken for ex in DOWNSTREAM[b]} - set(broken))
    scores = grade_inprocess(sub, MODERN, exercises=[*broken, *downstream])
    assert all(scores[ex][0] == 0 for ex in broken), scores
    assert all(scores[ex][0] == scores[ex][1] for ex in downstream), scores
