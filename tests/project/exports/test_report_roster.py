"""The instructor's side of a batch without grading anything: per-student rows and common mistakes in the
summary, the report's table, histogram and timing line, the roster, and the Canvas and Moodle gradebooks.

Scorecards are fabricated (as in test_outputs_hostile) and passed to the same ``job.finish`` a batch ends with.
"""

from __future__ import annotations

import copy
import csv
import json
import re
from pathlib import Path

import pytest

from grader import schema
from grader.batch import job
from grader.batch.engine import Options, Result, Run
from grader.cli.main import main
from grader.exports import lms, outputs, report
from grader.intake import roster
from grader.intake.classfolder import Entry
from tests.project.exports.test_outputs_hostile import card
from tests.project.support.common import shelve

NOT_IMPLEMENTED = "NotImplementedError: masks.causal_mask is not implemented yet (stub)"
MISSING = "StudentNotFound: module masks.py not found in the submission: create it (is it in the right folder?)"
WRONG = "causal_mask(4): values differ from the expected ones: got 1.5, expected 2.5"
ROSTER = (
    "\ufefflogin,Full name,Email,LMS id,section\nalice,Alice Liddell,alice@uni.edu,101,S1\n"
    "bob,Bob,bob@uni.edu,102,S1\ncarol,=cmd|' /C calc'!A0,carol@uni.edu,103,S2\nzoe,Zoe Zed,zoe@uni.edu,104,S2\n"
)


def _card(student: str, score: float, message: str = WRONG, **kw) -> dict:
    c = card(student, score=score, **kw)
    for ex in c["exercises"]:
        t = ex["tests"][0]
        ex["tests"] = [
            t,
            {**t, "id": t["id"] + "2", "name": "causal 2", "outcome": "failed", "message": message},
        ]
        t["outcome"], t["message"] = ("passed", "") if score >= 8 else ("failed", message)
    return c


def _class() -> list[tuple[str, dict]]:
    eve = _card("eve", 2)
    eve["incidents"] = [{"kind": "timeout", "test": "t", "message": "ran past its time limit"}]
    eve["integrity"] = [
        {
            "file": "masks.py",
            "line": 3,
            "construct": "sys.modules",
            "rule": "module-registry",
            "severity": "withhold",
            "reason": "reaches the module registry",
            "exercises": ["masks"],
        },
        {
            "file": "masks.py",
            "line": 9,
            "construct": "getattr(self.heads, name)",
            "rule": "dynamic-access",
            "severity": "review",
            "reason": "a name known only at run time",
            "exercises": [],
        },
    ]
    eve["exercises"][0]["withheld"] = "an integrity finding in its code"
    return [
        ("alice", _card("alice", 8, sha="a" * 64)),
        ("bob", _card("bob", 3)),
        ("carol", _card("carol", 3)),
        ("dave", _card("dave", 0, NOT_IMPLEMENTED, sha="a" * 64)),
        ("erin", _card("erin", 0, MISSING)),
        ("eve", eve),
        ("frank", card("frank", error="could not read it")),
    ]


def _finish(
    named, out: Path, *, skipped: bool = False, students=None, wall_s: float = 30.0
) -> job.Outcome:
    results = [
        Result(Entry(k, k, Path("/class") / k, "folder"), copy.deepcopy(c), skipped=skipped)
        for k, c in named
    ]
    shelve(out, named)
    return job.finish(
        Run(results, "namespace", 2, wall_s),
        out=out,
        options=Options(exercises=["masks"]),
        export=("csv", "canvas", "moodle"),
        roster=students,
    )


@pytest.fixture()
def finished(tmp_path):
    path = tmp_path / "roster.csv"
    path.write_text(ROSTER, encoding="utf-8")
    return _finish(_class(), tmp_path / "out", students=roster.load(path)), tmp_path / "out"


def test_summary_rows_flag_what_to_look_at_and_count_mistakes_by_students(finished):
    outcome, _ = finished
    s = outcome.summary
    schema.validate("summary", s)
    rows = {r["key"]: r for r in s["students"]}
    assert list(rows) == ["alice", "bob", "carol", "dave", "erin", "eve", "frank", "zoe"]
    assert (
        rows["zoe"]["status"] == "missing"
        and rows["zoe"]["total"] == 0
        and s["counts"]["missing"] == 1
    )
    assert rows["eve"]["flags"] == [
        "1 timeout(s)",
        "integrity: 1 finding(s)",
        "needs review: 1",
        "withheld: masks",
    ]
    assert [(f["line"], f["severity"]) for f in rows["eve"]["integrity"]] == [
        (3, "withhold"),
        (9, "review"),
    ]
    assert rows["alice"]["flags"] == ["identical #1"] and rows["dave"]["identical_group"] == 1
    assert (
        rows["frank"]["flags"] == ["error: intake"]
        and rows["frank"]["error"]["message"] == "could not read it"
    )
    assert [f["message"] for f in rows["bob"]["failing"]] == [WRONG, WRONG] and rows["bob"][
        "failed_tests"
    ] == 2
    assert (
        rows["dave"]["failed_tests"] == 2 and len(rows["dave"]["failing"]) == 1
    )  # absent work: one line
    # not-implemented and missing-file failures are not mistakes; one mistake per test (issue 28.10: the test and the
    # message's first line, numbers masked, unless the suites diagnose a misconception)
    first, second = s["common_failures"]
    assert (
        first["count"] == 4
        and first["tests"] == 4
        and first["students"] == ["alice", "bob", "carol", "eve"]
    )
    assert second["count"] == 3 and second["students"] == ["bob", "carol", "eve"]
    assert first["test"] == "masks::causal 2" and first["hint"] == ""
    for mistake in (first, second):
        assert (
            mistake["message"]
            == "causal_mask(#): values differ from the expected ones: got #, expected #"
        )
    assert s["roster"] == {
        "students": 4,
        "missing": ["zoe"],
        "not_on_roster": ["dave", "erin", "eve", "frank"],
    }


def test_report_has_the_student_table_drill_down_and_a_readable_histogram(finished):
    _, out = finished
    page = (out / "report.html").read_text("utf-8")
    table = page[
        page.index('<table id="students"') : page.index(
            "</table>", page.index('<table id="students"')
        )
    ]
    assert table.count("<tr class=") == 8 and '<tr class="missing" id="student-zoe">' in table
    assert "<details><summary>2 failing</summary>" in table and "got 1.5, expected 2.5" in table
    assert "reaches the module registry" in table and "withheld masks" in table
    assert (
        "<b>needs review</b> masks.py line 9: <code>getattr(self.heads, name)</code> (dynamic-access)"
        in table
    )
    findings = page[
        page.index('<table id="integrity"') : page.index(
            "</table>", page.index('<table id="integrity"')
        )
    ]
    assert findings.index(">withheld<") < findings.index(
        ">needs review<"
    )  # proofs first, then what to read
    assert "masks.py line 9" in findings and "getattr(self.heads, name)" in findings
    counts = re.findall(
        r'<text class="count" x="[\d.]+" y="([\d.-]+)" text-anchor="middle">(\d+)</text>', page
    )
    assert len(counts) == 10 and all(
        float(y) > 10 for y, _ in counts
    )  # the tallest bar's count is on the page
    assert [int(n) for _, n in counts] == [2, 0, 1, 2, 0, 0, 0, 0, 0, 1]
    assert ">students</text>" in page and "percent of the maximum" in page
    csp = re.search(r"script-src '(sha256-[^']+)'", page).group(1)
    assert csp == report.script_hash() and page.count("<script>") == 1


def test_a_rerun_that_grades_nothing_keeps_the_last_real_timing(finished, tmp_path):
    outcome, out = finished
    first = outcome.summary["last_graded_run"]
    assert first["graded"] == 7 and first["submissions_per_minute"] == 14.0
    again = _finish(_class(), out, skipped=True, wall_s=0.2).summary
    assert again["submissions_per_minute"] == 0 and again["last_graded_run"] == first
    page = (out / "report.html").read_text("utf-8")
    assert '<b id="throughput">14</b>' in page and "graded none" in page
    old = json.loads((out / "summary.json").read_text())
    del old[
        "last_graded_run"
    ]  # a summary written before the field existed: its top-level figures count
    old["submissions_per_minute"], old["counts"]["skipped"] = 9.5, 0
    (out / "summary.json").write_text(json.dumps(old))
    assert (
        _finish(_class(), out, skipped=True, wall_s=0.2).summary["last_graded_run"][
            "submissions_per_minute"
        ]
        == 9.5
    )
    (out / "summary.json").write_text(
        json.dumps({**old, "last_graded_run": {"graded": "x", "slots": True}})
    )
    assert (
        _finish(_class(), out, skipped=True, wall_s=0.2).summary["last_graded_run"]["graded"] == 0
    )  # junk: not kept


def test_gradebook_with_a_roster_has_names_and_a_missing_row(finished):
    _, out = finished
    rows = list(csv.DictReader((out / "gradebook.csv").open(encoding="utf-8")))
    assert [r["student"] for r in rows] == [
        "alice",
        "bob",
        "carol",
        "zoe",
        "dave",
        "erin",
        "eve",
        "frank",
    ]
    assert (
        rows[0]["name"] == "Alice Liddell"
        and rows[0]["lms_id"] == "101"
        and rows[0]["email"] == "alice@uni.edu"
    )
    assert (rows[3]["status"], rows[3]["total"], rows[3]["masks"]) == ("missing", "0", "0")
    assert rows[2]["name"] == "'=cmd|' /C calc'!A0"  # a formula in the roster stays text


def _canvas_student_columns(header: list[str]) -> int:
    """canvas-lms's GradebookImporter#header? and #update_column_count, restated."""
    assert len(header) > 3 and re.search("Student", header[0]) and re.search("ID", header[1])
    count = 3
    if re.search(r"SIS\s+Login\s+ID", header[2]):
        count += 1
    elif re.search(r"SIS\s+User\s+ID", header[2]) and re.search(r"SIS\s+Login\s+ID", header[3]):
        count += 2
    assert re.search("Section", header[count - 1])
    return count


def test_canvas_and_moodle_files_have_the_columns_their_importers_read(finished):
    _, out = finished
    canvas = list(csv.reader((out / "exports" / "canvas" / "canvas.csv").open(encoding="utf-8")))
    columns = _canvas_student_columns(canvas[0])
    assert columns == 5 and canvas[0][5:] == ["Attention mechanisms in PyTorch"]
    assert re.search("Points Possible", canvas[1][0]) and canvas[1][5] == "8"
    by_id = {r[1]: r for r in canvas[2:] if r[1]}
    assert (
        by_id["101"][5] == "8" and by_id["104"][0] == "Zoe Zed" and by_id["104"][5] == "0"
    )  # missing: 0
    assert by_id["103"][0].startswith("'=")
    frank = next(r for r in canvas[2:] if r[0] == "frank")
    assert (
        frank[3] == "frank" and frank[5] == ""
    )  # not on the roster: SIS login; an error uploads nothing
    moodle = list(
        csv.DictReader((out / "exports" / "moodle" / "moodle.csv").open(encoding="utf-8"))
    )
    zoe = next(r for r in moodle if r["Username"] == "zoe")
    assert zoe["Email address"] == "zoe@uni.edu" and zoe["ID number"] == "104"
    assert zoe["Attention mechanisms in PyTorch"] == "0"
    assert zoe["Attention mechanisms in PyTorch (feedback)"].startswith("missing")
    assert (
        next(r for r in moodle if r["Username"] == "frank")["Attention mechanisms in PyTorch"] == ""
    )


def test_roster_errors_are_usage_errors(tmp_path, capsys):
    with pytest.raises(roster.RosterError, match="no `login` column"):
        roster.parse("name,email\nA,a@x\n")
    with pytest.raises(roster.RosterError, match="listed twice"):
        roster.parse("login\nalice\nalice\n")
    assert [s.key for s in roster.parse("github,name\nal/ice,A\n\n,nobody\n")] == ["al_ice"]
    cards = tmp_path / "cards"
    cards.mkdir()
    for key, c in _class():
        (cards / f"{key}.json").write_text(json.dumps(c))
    (tmp_path / "bad.csv").write_text("name\nA\n")
    paths = [str(p) for p in sorted(cards.glob("*.json"))]
    assert (
        main(["export", "--format", "canvas", "--roster", str(tmp_path / "bad.csv"), *paths]) == 2
    )
    assert "no `login` column" in capsys.readouterr().err
    (tmp_path / "roster.csv").write_text(ROSTER, encoding="utf-8")
    assert (
        main(["export", "--format", "moodle", "--roster", str(tmp_path / "roster.csv"), *paths])
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert (
        lines[0].startswith("Username,Full name,Email address,ID number,") and len(lines) == 1 + 8
    )
    assert lms.FORMATS == ("canvas", "moodle") and set(lms.FORMATS) <= set(outputs.FORMATS)


def test_a_canvas_export_without_a_roster_warns_and_says_what_to_pass(tmp_path, capsys):
    """Without a roster Canvas's ID and SIS User ID are blank (issue 28.15): said, with what to pass; not said
    with a roster or for an export that needs none."""
    cards = tmp_path / "cards"
    cards.mkdir()
    for key, c in _class():
        (cards / f"{key}.json").write_text(json.dumps(c))
    paths = [str(p) for p in sorted(cards.glob("*.json"))]
    assert main(["export", "--format", "canvas", *paths]) == 0
    out, err = capsys.readouterr()
    rows = list(csv.reader(out.splitlines()))
    assert rows[0][:3] == ["Student", "ID", "SIS User ID"] and all(
        r[1] == r[2] == "" for r in rows[2:]
    )
    assert (
        "warning: the Canvas export has no roster: its ID and SIS User ID columns are blank" in err
    )
    assert "--roster roster.csv" in err and "lms_id" in err
    (tmp_path / "roster.csv").write_text(ROSTER, encoding="utf-8")
    assert (
        main(["export", "--format", "canvas", "--roster", str(tmp_path / "roster.csv"), *paths])
        == 0
    )
    assert "warning" not in capsys.readouterr().err
    assert main(["export", "--format", "moodle", *paths]) == 0
    assert "warning" not in capsys.readouterr().err
