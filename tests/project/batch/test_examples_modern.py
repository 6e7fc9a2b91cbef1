"""The second assignment end to end in the sandbox: `grader batch examples/submissions-modern --assignment
attention-modern` (every layout, scorecards against the schema, the gradebook, the summary, the report, every export)
and `grader grade SUBMISSION --assignment attention-modern` on one student.

The class (examples/README.md): grace (full marks), heidi (`repeat` for the GQA head grouping), ivan (RoPE rotates the
wrong half), judy (partly done), mallory (hostile), niaj (one notebook: sliding windows only), olivia (the stubs).
A mistake costs points on its own exercise only: ivan's wrong RoPE is not charged again to GQA or the KV cache."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from grader import schema
from grader.cli.main import main
from grader.course import manifest
from tests.project.support.common import ROOT, expect_batch_exports

pytestmark = pytest.mark.cost(55)  # seconds on 2 cores: started early (tests/project/conftest.py)

MODERN = "attention-modern"
SPEC = manifest.load(assignment=MODERN)
CLASS = ROOT / "examples" / "submissions-modern"
POINTS = {e.id: e.points for e in SPEC.exercises}
FAST = [
    "--assignment",
    MODERN,
    "--per-test-time-limit",
    "6",
    "-j",
    "2",
    "--seed",
    "16",
]  # mallory loops: 3 x 6 s
# (not less: the reference decodes 512 tokens under the peak-storage mode in 0.9-1.2 s of CPU, 2 s+ on a loaded CI)
EXPORTS = ("gradescope", "github-classroom", "csv", "canvas", "moodle")
STUDENTS = {"grace", "heidi", "ivan", "judy", "mallory", "niaj", "olivia"}


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    out = tmp_path_factory.mktemp("modern") / "out"
    code = main(
        [
            "batch",
            str(CLASS),
            "--out",
            str(out),
            *FAST,
            *(a for e in EXPORTS for a in ("--export", e)),
        ]
    )
    return out, code


def _cards(out: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted((out / "scorecards").glob("*.json"))}


def _points(card: dict) -> dict[str, float]:
    return {e["id"]: e["score"] for e in card["exercises"]}


def test_every_student_gets_a_valid_scorecard_of_the_second_assignment(graded):
    out, code = graded
    cards = _cards(out)
    assert code == 0 and set(cards) == STUDENTS
    for card in cards.values():
        schema.validate("scorecard", card)
        assert (card["assignment"], card["status"], card["max_score"]) == (MODERN, "graded", 100)
        assert [e["id"] for e in card["exercises"]] == SPEC.ids()
        assert card["isolation"]["backend"] in ("namespace", "bwrap", "process")
    layouts = {k: c["submission"]["layout"] for k, c in cards.items()}
    assert layouts["grace"] == "zip:directory" and layouts["heidi"] == "tar.gz:directory"
    assert layouts["ivan"] == "zip:exercises-folder" and layouts["niaj"] == "notebook"
    assert layouts["olivia"] == "exercises-folder" and layouts["judy"] == "directory"


def test_full_marks_stubs_zero_and_the_order_of_the_class(graded):
    cards = _cards(graded[0])
    total = {k: c["score"] for k, c in cards.items()}
    assert total["grace"] == 100 and _points(cards["grace"]) == POINTS
    assert total["olivia"] == 0 and total["mallory"] == 0
    assert 100 > total["ivan"] > total["judy"] and 100 > total["heidi"] > total["judy"]
    assert (
        total["judy"] == POINTS["rope"] + POINTS["sliding_window"]
    )  # two solved, two stubs, one missing
    assert (
        total["niaj"] == POINTS["sliding_window"]
    )  # one notebook, one exercise: its test cell is dropped


@pytest.mark.parametrize(
    ("student", "exercise"), [("heidi", "grouped_query_attention"), ("ivan", "rope")]
)
def test_a_typical_mistake_costs_points_on_its_own_exercise_only(graded, student, exercise):
    got = _points(_cards(graded[0])[student])
    assert got[exercise] < POINTS[exercise], got
    assert {k: v for k, v in got.items() if k != exercise} == {
        k: v for k, v in POINTS.items() if k != exercise
    }


def test_the_hostile_student_gets_zero_and_the_reasons(graded):
    card = _cards(graded[0])["mallory"]
    tests = {t["name"].split("::")[-1]: t for e in card["exercises"] for t in e["tests"]}
    rope = [t for e in card["exercises"] if e["id"] == "rope" for t in e["tests"]]
    assert any(t["outcome"] == "timeout" for t in rope), [t["outcome"] for t in rope]
    flash = [t for e in card["exercises"] if e["id"] == "flash_backward" for t in e["tests"]]
    assert flash and all(t["outcome"] != "passed" for t in flash)
    assert any("the worker process ended" in t["message"] for t in flash), flash[0][
        "message"
    ]  # os._exit at import
    assert all(t["outcome"] != "passed" for t in tests.values())


def test_gradebook_summary_and_report(graded):
    out, _ = graded
    cards = _cards(out)
    rows = {r["student"]: r for r in csv.DictReader((out / "gradebook.csv").open())}
    assert set(rows) == STUDENTS
    for student, card in cards.items():
        assert float(rows[student]["total"]) == card["score"]
        assert {ex: float(rows[student][ex]) for ex in SPEC.ids()} == _points(card)
    summary = json.loads((out / "summary.json").read_text())
    schema.validate("summary", summary)
    assert summary["assignment"] == MODERN and [e["id"] for e in summary["exercises"]] == SPEC.ids()
    assert summary["counts"]["submissions"] == 7 and summary["counts"]["full_marks"] == 1
    assert summary["score"]["max_score"] == 100 and summary["score"]["max"] == 100
    report = (out / "report.html").read_text()
    assert all(f"student-{s}" in report for s in STUDENTS) and all(
        ex in report for ex in SPEC.ids()
    )


def test_every_export_is_valid_and_carries_the_points(graded):
    out, _ = graded
    cards = _cards(out)
    expect_batch_exports(out, cards)
    gradescope = {
        k: json.loads((out / "exports" / "gradescope" / k / "results.json").read_text())
        for k in cards
    }
    assert {k: g["score"] for k, g in gradescope.items()} == pytest.approx(
        {k: c["score"] for k, c in cards.items()}
    )
    canvas = list(csv.reader((out / "exports" / "canvas" / "canvas.csv").open()))
    assert canvas[0][-1] == SPEC.title and len(canvas) == 2 + len(
        STUDENTS
    )  # the header, Points Possible, the class
    moodle = list(csv.DictReader((out / "exports" / "moodle" / "moodle.csv").open()))
    assert {r["Username"]: float(r[SPEC.title]) for r in moodle} == {
        k: c["score"] for k, c in _cards(out).items()
    }


def test_grader_grade_takes_the_assignment_too(graded, tmp_path):
    out, _ = graded
    card_path = tmp_path / "ivan.json"
    assert (
        main(
            [
                "grade",
                str(CLASS / "ivan.zip"),
                "--assignment",
                MODERN,
                "--out",
                str(card_path),
                "--seed",
                "16",
            ]
        )
        == 0
    )
    card = json.loads(card_path.read_text())
    schema.validate("scorecard", card)
    assert card["assignment"] == MODERN and _points(card) == _points(
        _cards(out)["ivan"]
    )  # same seed, same points
    assert main(["export", "--format", "gradescope", str(card_path)]) == 0
