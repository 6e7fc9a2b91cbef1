"""Configuration passed as objects: ``--manifest`` honoured by grade, batch (its slots too) and check; the
assignment loaded once per command; one options type; the lanes of a batch slot.

The course copy changes softmax in three places, so each can be seen to follow: its title and points in
the copied ``assignments.json``, and the points of one hidden test in the copied suite.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import zipfile
from pathlib import Path

import pytest

from grader.cli.main import main
from grader.course import manifest
from grader.grade import OptionChanges, grade
from grader.options import DEFAULTS, GradeOptions
from grader.sandbox.isolation import LaunchSpec
from grader.sandbox.starters import ColdStarter, SlotStarters, lane_slot
from tests.project.support.common import ROOT

pytestmark = pytest.mark.cost(16)  # seconds on 2 cores: started early (tests/project/conftest.py)

TITLE = "Softmax, from the copied manifest"


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the course where softmax is worth 9 points (6 in the repository's)."""
    course = tmp_path_factory.mktemp("course")
    for part in ("solutions", "exercises", "tests/hidden", "tests/public"):
        shutil.copytree(ROOT / part, course / part, ignore=shutil.ignore_patterns("__pycache__"))
    document = json.loads((ROOT / "assignments.json").read_text("utf-8"))
    [softmax] = [e for e in document["assignments"][0]["exercises"] if e["id"] == "softmax"]
    assert softmax["points"] == 6
    softmax.update(points=9, title=TITLE)
    (course / "assignments.json").write_text(json.dumps(document), "utf-8")
    suite = course / "tests" / "hidden" / "test_softmax.py"
    text = suite.read_text("utf-8")
    one_test = "@pytest.mark.points(1)\ndef test_stable_in_float16_keeps_dtype_and_has_no_overflow("
    assert one_test in text
    suite.write_text(text.replace(one_test, one_test.replace("points(1)", "points(4)")), "utf-8")
    return course


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[Path | None]:
    """Every in-process ``manifest.load`` call, by the path it was given."""
    calls: list[Path | None] = []
    real = manifest.load

    def counting(
        path: Path | None = None, assignment: str = manifest.DEFAULT_ASSIGNMENT
    ) -> manifest.Assignment:
        calls.append(path)
        return real(path, assignment)

    monkeypatch.setattr(manifest, "load", counting)
    return calls


def _softmax(card: dict) -> dict:
    return next(e for e in card["exercises"] if e["id"] == "softmax")


def test_grade_honours_manifest_and_loads_it_once(course, loads, tmp_path):
    out = tmp_path / "card.json"
    manifest_path = course / "assignments.json"
    code = main(
        [
            "grade",
            str(course / "solutions"),
            "--manifest",
            str(manifest_path),
            "--out",
            str(out),
            "--isolation",
            "process",
            "--seed",
            "3",
        ]
    )
    assert code == 0
    card = json.loads(out.read_text())
    assert (card["status"], card["score"], card["max_score"]) == (
        "graded",
        103,
        103,
    )  # the copied suite's points
    assert (_softmax(card)["title"], _softmax(card)["max_score"]) == (
        TITLE,
        9,
    )  # the copied manifest's title
    assert card["canary"]["max_score"] == 103  # the canary proved the same course
    assert loads == [manifest_path]  # once for the command: canary and grade share the assignment


def test_batch_and_its_slots_honour_manifest_and_it_is_loaded_once(course, loads, tmp_path):
    klass, out = tmp_path / "class", tmp_path / "out"
    (klass / "alice").mkdir(parents=True)
    shutil.copy(ROOT / "solutions" / "softmax.py", klass / "alice" / "softmax.py")
    with zipfile.ZipFile(klass / "bob.zip", "w") as zf:
        zf.writestr(
            "../softmax.py", "x = 1\n"
        )  # an intake error: its card's max_score is the manifest's points
    manifest_path = course / "assignments.json"
    code = main(
        [
            "batch",
            str(klass),
            "--out",
            str(out),
            "--manifest",
            str(manifest_path),
            "--exercise",
            "softmax",
            "--per-test-time-limit",
            "8",
            "-j",
            "1",
            "--seed",
            "5",
            "--quiet",
        ]
    )
    assert code == 1  # bob's intake error
    alice = json.loads((out / "scorecards" / "alice.json").read_text())
    bob = json.loads((out / "scorecards" / "bob.json").read_text())
    # both cards were built in the slot process: it graded with the copied suite and manifest
    assert (alice["status"], alice["score"], alice["max_score"], _softmax(alice)["title"]) == (
        "graded",
        9,
        9,
        TITLE,
    )
    assert (bob["status"], bob["error"]["kind"], bob["max_score"]) == ("error", "intake", 9)
    assert json.loads((out / "summary.json").read_text())["score"]["max_score"] == 9
    assert loads == [manifest_path]  # once in this process (each slot loads it once, in its own)


def test_check_honours_manifest_and_loads_it_once(course, loads, capsys):
    manifest_path = course / "assignments.json"
    assert (
        main(["check", "softmax", "--manifest", str(manifest_path), "--json"]) == 1
    )  # the copy's stubs fail
    card = json.loads(capsys.readouterr().out)
    assert [e["id"] for e in card["exercises"]] == ["softmax"] and _softmax(card)["title"] == TITLE
    assert card["score"] == 0 and card["submission"]["path"] == str(course / "exercises")
    assert loads == [manifest_path]


def test_grade_shorthands_are_exactly_the_per_run_option_fields():
    """``grade(sub, isolation=...)`` overrides GradeOptions fields; which assignment is the
    ``assignment``/``options`` arguments' business (workers are started by ``starter=``)."""
    fields = {f.name for f in dataclasses.fields(GradeOptions)}
    assert set(OptionChanges.__annotations__) == fields - {
        "assignment",
        "manifest_path",
        "canary",
        "proof_pending",  # set by the command that proves beside the grade, never by hand
        "review_beside",  # set by `grader grade`, whose person waits on a machine with a spare core
    }


def test_cli_defaults_are_read_from_the_options():
    from grader.cli.main import build_parser

    parser = build_parser()
    grade = parser.parse_args(["grade", "sub"])
    batch = parser.parse_args(["batch", "sub", "--out", "o"])
    for args in (grade, batch):
        assert (args.assignment, args.isolation, args.manifest) == (
            DEFAULTS.assignment,
            DEFAULTS.isolation,
            None,
        )
    assert batch.threads == DEFAULTS.threads


def test_a_slot_alternates_its_two_lanes_and_no_two_slots_share_one():
    made: list[int] = []

    def spec_for(slot: int) -> LaunchSpec:
        made.append(slot)
        return LaunchSpec("process", slot=slot)

    starters = SlotStarters(spec_for, 3, "off")  # cold workers: nothing is started here
    try:
        picked = [starters.next() for _ in range(3)]
        assert all(isinstance(s, ColdStarter) for s in picked) and not starters.done()
    finally:
        starters.close()
    assert made == [6, 7] and [s.slot for s in picked] == [6, 7, 6]
    lanes = {lane_slot(slot, lane) for slot in range(8) for lane in (0, 1)}
    assert len(lanes) == 16


def test_a_second_course_in_the_same_process_runs_its_own_suites(course, tmp_path):
    """The default course's suites are imported first; the copy's same-named suites must still be the ones run."""
    from grader.scoring.runner import run_suites

    default = manifest.load()
    run_suites(
        [default.root / default.exercise("softmax").hidden_tests],
        student=ROOT / "solutions",
        seed=1,
        assignment=default,
    )
    card = grade(
        ROOT / "solutions",
        manifest_path=course / "assignments.json",
        isolation="inprocess",
        seed=1,
        exercises=["softmax"],
        canary=False,
    )
    assert (_softmax(card)["score"], _softmax(card)["max_score"]) == (9, 9)
