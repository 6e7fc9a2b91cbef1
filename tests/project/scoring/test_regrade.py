"""A rerun notices what changed (issue 28.1): every scorecard records what decides its grade, and `grader batch`
regrades the scorecards that no longer match, saying how many and why.

The end-to-end test grades one student on a copy of the course (softmax only), then changes the copy as an
instructor would between two runs: a hidden test, the manifest's entry, a reference solution. On 4ad1d57 every
rerun said "unchanged, kept" and kept the old grade.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from grader import __version__, canary, fingerprint, schema
from grader.batch import cards, progress
from grader.cli.main import main
from grader.cluster.shard_job import fingerprint as shard_fingerprint
from grader.course import manifest
from tests.project.support.common import ROOT, course_copy

pytestmark = pytest.mark.cost(60)  # six small batches

FAST = [
    "--exercise",
    "softmax",
    "--per-test-time-limit",
    "8",
    "-j",
    "1",
    "--seed",
    "5",
    "--no-canary",
]


def _batch(
    klass: Path, out: Path, course: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, dict]:
    code = main(
        [
            "batch",
            str(klass),
            "--out",
            str(out),
            "--manifest",
            str(course / "assignments.json"),
            *FAST,
        ]
    )
    card = json.loads((out / "scorecards" / "alice.json").read_text())
    return code, capsys.readouterr().err, card


def test_a_rerun_regrades_what_the_instructor_changed_and_says_why(tmp_path, capsys):
    course = course_copy(tmp_path / "course")
    klass, out = tmp_path / "class", tmp_path / "out"
    (klass / "alice").mkdir(parents=True)
    shutil.copy(ROOT / "solutions" / "softmax.py", klass / "alice" / "softmax.py")
    code, err, first = _batch(klass, out, course, capsys)
    assert code == 0 and first["status"] == "graded" and first["score"] == first["max_score"] > 0, (
        err
    )
    schema.validate("scorecard", first)
    record = first["grader"]["fingerprint"]
    assert record["isolation"] == first["isolation"]["backend"] and record["torch"].startswith(
        "2.13"
    )
    spec = manifest.load(course / "assignments.json")
    assert record == fingerprint.record(spec, backend=record["isolation"], per_test_time_limit=8.0)

    code, err, kept = _batch(klass, out, course, capsys)
    assert "alice: unchanged, kept" in err and kept == first  # nothing changed: nothing regraded

    (out / "scorecards" / "alice.json").write_text(
        json.dumps({**first, "grader": {"version": "0.1.0"}})
    )
    code, err, card = _batch(
        klass, out, course, capsys
    )  # a card of grader 0.1.0, which recorded nothing
    assert "graded before scorecards recorded what decides a grade (grader 0.1.0) (1)" in err, err
    assert card["grader"] == first["grader"] and card["grader"]["version"] == __version__

    edits = [
        ("suites", course / "tests/hidden/test_softmax.py", "the hidden suites changed"),
        ("references", course / "solutions/softmax.py", "the reference solutions changed"),
    ]
    for part, path, words in edits:
        path.write_text(path.read_text() + "\n# fixed after the first run\n")
        code, err, card = _batch(klass, out, course, capsys)
        assert (
            "unchanged, kept" not in err
            and f"1 earlier scorecard(s) graded again: {words} (1)" in err
        ), err
        assert card["timings"]["started"] != first["timings"]["started"]
        changed = {k for k in record if card["grader"]["fingerprint"][k] != record[k]}
        assert changed == {"key", part}, changed
        record = card["grader"]["fingerprint"]

    document = json.loads((course / "assignments.json").read_text())
    document["assignments"][0]["exercises"][0]["time_limit_s"] += (
        1  # the manifest's entry for this assignment
    )
    (course / "assignments.json").write_text(json.dumps(document, indent=2))
    code, err, card = _batch(klass, out, course, capsys)
    assert (
        "the assignment's manifest entry changed" in err
        and card["grader"]["fingerprint"]["manifest"] != record["manifest"]
    )


def _card(**fingerprint_record: str) -> dict:
    return {
        "status": "graded",
        "error": None,
        "submission": {"sha256": "a" * 64},
        "assignment": "x",
        "exercises": [{"id": "softmax"}],
        "grader": {"version": __version__, "fingerprint": fingerprint_record},
    }


def test_each_part_that_decides_a_grade_is_a_reason_of_its_own():
    spec = manifest.load()
    now = fingerprint.record(spec, backend="namespace")

    def check(card):
        return cards.stale(
            card, sha256="a" * 64, assignment="x", exercise_ids=["softmax"], grading=now
        )

    assert check(_card(**now)) == []
    for part in fingerprint.PARTS:
        other = {**now, part: "something else", "key": "0" * 64}
        assert check(_card(**other)) == [part], part
    assert check({**_card(**now), "grader": {"version": __version__}}) == ["missing"]
    assert check(None) == ["new"] and check({**_card(**now), "assignment": "y"}) == ["submission"]
    assert fingerprint.record(spec, backend="process")["isolation"] == "process"
    assert fingerprint.record(spec, backend="namespace", require_cuda=True)["key"] != now["key"]
    line = progress.plan_line(5, 2, {"suites": 2, "suites+references": 1})
    assert re.fullmatch(
        r"5 submissions: 2 unchanged since the last run; 3 earlier scorecard\(s\) graded again: "
        r"the hidden suites changed \(2\); the hidden suites changed and the reference solutions "
        r"changed \(1\)",
        line,
    ), line


def test_the_canary_the_shards_and_the_record_read_the_same_files(tmp_path):
    """One list of what decides a grade: a change to a suite moves the record, the canary's key and the
    shards' and Dask workers' fingerprint alike."""
    course = course_copy(tmp_path / "course")
    spec = manifest.load(course / "assignments.json")
    before = (
        fingerprint.record(spec, backend="none"),
        canary.cache_key(spec, backend="none", exercises=None, per_test_time_limit=None),
        shard_fingerprint(spec),
    )
    suite = course / "tests/hidden/test_masks.py"
    suite.write_text(suite.read_text() + "\n# changed\n")
    after = (
        fingerprint.record(spec, backend="none"),
        canary.cache_key(spec, backend="none", exercises=None, per_test_time_limit=None),
        shard_fingerprint(spec),
    )
    assert (
        before[0]["suites"] != after[0]["suites"]
        and before[1] != after[1]
        and before[2] != after[2]
    )
    moved = course_copy(tmp_path / "elsewhere")  # the same files in another folder: the same record
    assert (
        fingerprint.record(manifest.load(moved / "assignments.json"), backend="none") == before[0]
    )


def test_the_grader_files_are_listed_and_named_as_rglob_and_resolve_would(tmp_path, monkeypatch):
    """The one walk that lists the grader's files finds what two ``rglob`` passes found, folders
    behind links not entered, and names each as its resolved path would (a link by its target)."""
    real = fingerprint.PACKAGE
    assert fingerprint._sorted(fingerprint._package_files()) == fingerprint._sorted(
        {*real.rglob("*.py"), *real.rglob("*.json")}
    )
    assert all(fingerprint._real(p) == p.resolve() for p in fingerprint._package_files())
    package = tmp_path / "grader"
    (package / "sub" / "deeper").mkdir(parents=True)
    (package / "a.py").write_text("")
    (package / "sub" / "b.json").write_text("{}")
    (package / "sub" / "deeper" / "c.py").write_text("")
    (package / "sub" / "notes.txt").write_text("")
    (package / "odd.py").mkdir()  # a folder whose name matches: rglob lists it too
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "d.py").write_text("")
    (package / "linked").symlink_to(outside)  # not entered
    (package / "e.py").symlink_to(outside / "d.py")  # listed, named by its target
    monkeypatch.setattr(fingerprint, "PACKAGE", package)
    listed = fingerprint._sorted(fingerprint._package_files())
    assert listed == fingerprint._sorted({*package.rglob("*.py"), *package.rglob("*.json")})
    assert {p.relative_to(package).as_posix() for p in listed} == {
        "a.py",
        "sub/b.json",
        "sub/deeper/c.py",
        "odd.py",
        "e.py",
    }
    assert [fingerprint._real(p) for p in listed] == [p.resolve() for p in listed]
    assert fingerprint._real(package / "sub" / ".." / "a.py") == (package / "a.py")
