"""What the project's tests share besides fixtures: where the checkout is, submission folders made from the
references, an in-process grade, checks of a batch's exports, and the skip for tests that need `namespace`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from grader import schema
from grader.course import manifest
from grader.sandbox import choice
from grader.sandbox.starters import ZygoteStarter
from grader.sandbox.zygote_client import Zygote
from grader.scoring.points import exercise_scores
from grader.scoring.runner import run_suites

ROOT = Path(__file__).resolve().parents[3]
CORPUS = ROOT / "tests" / "corpus"

needs_namespace = pytest.mark.skipif(
    "namespace" not in choice.available(),
    reason="needs the namespace sandbox (root on Linux): bombs, hostile classes "
    "and Dask workers are unsafe or refused without it",
)


def starter_of(zygote: Zygote | None) -> ZygoteStarter | None:
    """What ``grade(..., starter=)`` takes for the ``zygote`` fixture's value (None: cold workers)."""
    return ZygoteStarter(zygote) if zygote is not None else None


def solutions_copy(dest: Path) -> Path:
    """A submission folder holding every reference module."""
    dest.mkdir(parents=True, exist_ok=True)
    for path in (ROOT / "solutions").glob("*.py"):
        if path.name != "__init__.py":
            shutil.copy(path, dest / path.name)
    return dest


def grade_inprocess(
    submission: Path,
    assignment: manifest.Assignment,
    *,
    suite: str = "hidden",
    exercises: list[str] | None = None,
    seed: int = 1234,
) -> dict[str, tuple[float, float]]:
    """{exercise: (score, max_score)} for ``submission`` on the chosen suite, run in this process."""
    chosen = [e for e in assignment.exercises if exercises is None or e.id in exercises]
    files = [
        assignment.root / (e.hidden_tests if suite == "hidden" else e.public_tests) for e in chosen
    ]
    results, _ = run_suites(files, student=submission, seed=seed, assignment=assignment)
    return {
        s.id: (s.score, s.max_score)
        for s in exercise_scores(results, assignment)
        if s.id in {e.id for e in chosen}
    }


def expect_batch_exports(out: Path, cards: dict[str, dict]) -> None:
    """A batch's ``--export gradescope/github-classroom/csv`` files in ``out``: each valid against its schema, the
    GitHub Classroom tests summing to the scorecard's points, the CSV export the gradebook itself."""
    for key, card in cards.items():
        schema.validate(
            "gradescope-results",
            json.loads((out / "exports" / "gradescope" / key / "results.json").read_text()),
        )
        gh = json.loads((out / "exports" / "github-classroom" / f"{key}.json").read_text())
        schema.validate("github-classroom", gh)
        assert sum(t["score"] for t in gh["tests"]) == pytest.approx(card["score"])
    assert (out / "exports" / "csv" / "gradebook.csv").read_text() == (
        out / "gradebook.csv"
    ).read_text()


def running(pid: int) -> bool:
    """Whether process ``pid`` is running: it exists and is not a zombie (one killed but not yet reaped counts as
    gone, unlike :func:`grader.procs.alive`)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def course_copy(dest: Path) -> Path:
    """A copy of the course at ``dest`` (the manifest, solutions, stubs and both suites), for tests that change it."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "assignments.json", dest / "assignments.json")
    for part in ("solutions", "exercises", "tests/hidden", "tests/public"):
        shutil.copytree(ROOT / part, dest / part, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def small_course(dest: Path, exercises: int = 2) -> Path:
    """A copy of the course reduced to its first assignment's first ``exercises`` (softmax and
    simple_attention by default: short grades, a short proof); the path of its manifest."""
    course = course_copy(dest)
    document = json.loads((course / "assignments.json").read_text())
    document["assignments"] = document["assignments"][:1]
    document["assignments"][0]["exercises"] = document["assignments"][0]["exercises"][:exercises]
    (course / "assignments.json").write_text(json.dumps(document, indent=2))
    return course / "assignments.json"


def shelve(out: Path, named: list[tuple[str, dict]]) -> None:
    """Put fabricated scorecards where a batch writes them (``job.finish`` reads the class from disk), as an
    older grader could have: plain JSON, not validated again."""
    from grader.batch.cards import card_path

    for key, card in named:
        path = card_path(out, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(card), "utf-8", errors="surrogateescape")
