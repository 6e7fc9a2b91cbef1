"""A batch's trusted process keeps a slim form of each scorecard and reads the whole ones back from disk.

The engine hands ``on_result`` the whole card, then keeps only :func:`grader.scoring.scorecard.slim`; the end
step (gradebook, summary, report, exports) walks the cards on disk one at a time (:class:`cards.Shelf`) and must
write exactly what it wrote from whole cards held in memory. The oracle is the same end step over the whole
cards as a list.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

from grader.batch import cards, engine, job
from grader.errors import GraderFault
from grader.exports import outputs
from grader.exports.summary import summarize
from grader.intake.classfolder import Entry
from grader.scoring import scorecard
from tests.project.exports.test_outputs_hostile import card

EXERCISES = ["masks"]


def _class() -> dict[str, dict[str, Any]]:
    whole = {f"s{i}": card(f"s{i}", sha=f"{i % 2}" * 64, score=float(i)) for i in range(5)}
    whole["err"] = card("err", error="unreadable archive")
    whole["s1"]["student_output"] = {"stdout_bytes": 9, "stderr_bytes": 0}
    return whole


class _Copies:
    """Grades each entry as the card fabricated for it (the engine's side is what is tested)."""

    backend, slots = "process", 1
    whole: ClassVar[dict[str, dict[str, Any]]] = {}

    def __init__(self, **_: Any) -> None: ...

    def prove(self, pending: list[Entry]) -> None:
        return None

    def grade(self, todo: list[Entry]) -> Any:
        for entry in todo:
            yield engine.Result(entry, copy.deepcopy(self.whole[entry.key]), wall_s=0.1)

    def stop(self) -> None: ...

    def figures(self) -> dict[str, Any]:
        return {}


def _run(tmp_path: Path, whole: dict[str, dict[str, Any]]) -> tuple[engine.Run, list[dict]]:
    _Copies.whole = whole
    heard: list[dict[str, Any]] = []
    entries = [Entry(k, k, tmp_path / "class" / k, "folder") for k in whole]
    options = engine.Options(exercises=EXERCISES, seed=7, canary=False)
    run = engine.run(
        entries,
        out=tmp_path / "out",
        options=options,
        grading=_Copies,
        on_result=lambda r: heard.append(copy.deepcopy(r.card)),
    )
    return run, heard


def test_the_run_keeps_slim_cards_and_on_result_hears_whole_ones(tmp_path):
    whole = _class()
    run, heard = _run(tmp_path, whole)
    assert [len(c["exercises"][0]["tests"]) for c in heard if c["status"] == "graded"] == [1] * 5
    for result in run.results:
        kept = result.card
        assert "student_output" not in kept and all("tests" not in e for e in kept["exercises"])
        assert (kept["score"], kept["status"]) == (
            whole[result.entry.key]["score"],
            whole[result.entry.key]["status"],
        )
        on_disk = json.loads(cards.card_path(tmp_path / "out", result.entry.key).read_text())
        assert on_disk["exercises"] == whole[result.entry.key]["exercises"]
    assert run.error_kinds() == {"intake": 1}


def test_the_end_step_from_disk_writes_what_whole_cards_in_memory_give(tmp_path):
    whole = _class()
    run, _ = _run(tmp_path, whole)
    options = engine.Options(exercises=EXERCISES, seed=7, canary=False)
    outcome = job.finish(run, out=tmp_path / "out", options=options, export=("gradescope", "csv"))
    named = [(k, c) for k, c in whole.items()]
    assignment = options.load()
    oracle = summarize(
        named,
        assignment=assignment,
        backend=run.backend,
        slots=run.slots,
        wall_s=run.wall_s,
        skipped=0,
        exercise_ids=EXERCISES,
    )
    assert _timeless(outcome.summary) == _timeless(oracle)
    assert outcome.summary["common_failures"][0]["count"] == 5  # every graded card failed one test
    gradebook = (tmp_path / "out" / "gradebook.csv").read_text()
    assert gradebook == outputs.gradebook_csv(named, EXERCISES)
    doc = json.loads(
        (tmp_path / "out" / "exports" / "gradescope" / "s3" / "results.json").read_text()
    )
    assert doc["score"] == 3.0 and len(doc["tests"]) == 1


def _timeless(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in ("generated", "last_graded_run", "timing")}


def test_the_summary_reads_the_class_once():
    whole = _class()
    once = iter(whole.items())  # a second pass would see nothing
    from grader.course import manifest

    doc = summarize(
        once,
        assignment=manifest.load(None, "attention-basics"),
        backend="process",
        slots=1,
        wall_s=1.0,
        skipped=0,
        exercise_ids=EXERCISES,
    )
    assert doc["counts"]["submissions"] == 6 and doc["counts"]["errors"] == 1
    assert doc["score"]["mean"] == 2.0 and [r["key"] for r in doc["students"]] == sorted(whole)


def test_a_scorecard_gone_from_disk_is_a_grader_fault_that_says_to_rerun(tmp_path):
    shelf = cards.Shelf(tmp_path, ["here", "gone"])
    cards.card_path(tmp_path, "here").parent.mkdir(parents=True)
    cards.card_path(tmp_path, "here").write_text(json.dumps(card("here")))
    seen = iter(shelf)
    assert next(seen)[1]["submission"]["student"] == "here"
    with pytest.raises(GraderFault, match=r"gone\.json.*run the same command again"):
        next(seen)


def test_slim_keeps_every_score_and_drops_only_tests_and_output():
    whole = card("x", score=3.0)
    slim = scorecard.slim(whole)
    assert set(whole) - set(slim) == {"student_output"}
    assert slim["exercises"] == [
        {k: v for k, v in e.items() if k != "tests"} for e in whole["exercises"]
    ]
    assert (
        slim["exercises"][0]["score"] == whole["exercises"][0]["score"]
        and "tests" in whole["exercises"][0]
    )
