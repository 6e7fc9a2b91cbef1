"""The batch outputs survive any input: gradebook, summary, report and exports from hostile scorecards.

Most tests fabricate scorecards (old ones on disk may hold anything: lone surrogates, control
characters, formula-looking ids) and call the library functions; one ``grader batch`` runs end to
end on a small hostile class folder, grading only ``masks``.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from grader import __version__, schema
from grader.batch import job, progress
from grader.batch.engine import Options, Result, Run
from grader.exports import outputs, report
from grader.intake.classfolder import Entry
from tests.project.support.common import CORPUS, ROOT, shelve

HOSTILE = "lone \udcff surrogate, ESC \x1b[31m, NUL \x00, bidi \u202e, newline\n[9/9] alice: 8/8, <script>x</script>"
SHA = {name: (c * 64) for name, c in (("a", "a"), ("b", "b"), ("c", "c"))}


def card(
    student: str, *, sha: str = "", score: float = 4.0, error: str | None = None, text: str = ""
) -> dict[str, Any]:
    """A schema-valid scorecard, with ``text`` in every student-influenced string."""
    test = {
        "id": "tests/hidden/test_masks.py::test_causal",
        "name": f"causal {text}",
        "outcome": "failed",
        "points": score,
        "max_points": 8,
        "message": f"expected 1, got 2 {text}",
        "duration": 0.01,
        "cuda": False,
        "counted": True,
    }
    graded = error is None
    return {
        "schema_version": 3,
        "assignment": "attention-basics",
        "submission": {
            "path": f"/class/{student}{text}",
            "student": student + text,
            "sha256": sha,
            "layout": "directory",
            "files": [{"name": f"masks{text}.py", "bytes": 1, "sha256": "d" * 64}],
        },
        "status": "graded" if graded else "error",
        "error": None if graded else {"kind": "intake", "message": error},
        "score": score if graded else 0,
        "max_score": 8,
        "exercises": [
            {"id": "masks", "title": "Masks", "score": score, "max_score": 8, "tests": [test]}
        ]
        if graded
        else [],
        "isolation": {
            "backend": "namespace",
            "uid": 1000,
            "limits": {},
            "cgroup": "v2",
            "seccomp": True,
            "threads": 1,
            "file_view": "namespace",
            "attested": True,
        },
        "seed": 1,
        "grader": {"version": __version__},
        "environment": {"python": "3.11", "torch": "2", "cuda": None, "platform": "linux"},
        "timings": {
            "started": "2026-01-01T00:00:00+00:00",
            "finished": "2026-01-01T00:00:01+00:00",
            "total_s": 1.0,
        },
        "incidents": [],
        "student_output": {"stdout_bytes": 0, "stderr_bytes": 0},
    }


def run_of(named: list[tuple[str, dict[str, Any]]]) -> Run:
    return Run(
        [Result(Entry(key, key, Path("/class") / key, "folder"), c) for key, c in named],
        "namespace",
        1,
        2.0,
    )


def finish(named: list[tuple[str, dict[str, Any]]], out: Path) -> job.Outcome:
    shelve(out, named)
    return job.finish(
        run_of(named), out=out, options=Options(exercises=["masks"]), export=outputs.FORMATS
    )


def test_every_output_survives_hostile_strings_in_old_scorecards(tmp_path):
    named = [(f"k{n}", card(f"s{n}", sha=SHA["a"], text=HOSTILE)) for n in range(3)]
    named += [("bad\udcffkey", card("x", text=HOSTILE, error=f"intake failed: {HOSTILE}"))]
    for _, c in named:
        schema.validate("scorecard", c)  # what an older grader could have written
    outcome = finish(named, tmp_path)
    page = (tmp_path / "report.html").read_text("utf-8")
    assert (
        "\\udcff" in page and "<script>x" not in page and "\x1b" not in page and "\x00" not in page
    )
    assert page.count("<script") == 1  # the report's own sorting script, allowed by its hash only
    summary = json.loads((tmp_path / "summary.json").read_text("utf-8"))
    schema.validate("summary", summary)
    assert (
        summary["errors"][0]["student"] == "bad\\udcffkey"
        and "\\x1b" in summary["errors"][0]["message"]
    )
    rows = list(csv.DictReader(io.StringIO((tmp_path / "gradebook.csv").read_text("utf-8"))))
    assert len(rows) == 4 and all(r["student"].encode("utf-8") for r in rows)
    assert (
        len(outcome.exported) == 4 + 4 + 1 + 2
    )  # gradescope, github-classroom, csv, canvas + moodle
    for path in outcome.exported:
        text = path.read_text("utf-8")
        assert "\udcff" not in text and (path.suffix == ".csv" or json.loads(text))


def test_gradebook_cells_that_a_spreadsheet_would_run_are_escaped_and_numbers_stay_numbers(
    tmp_path,
):
    keys = ["-1+B2", "@A1", '=HYPERLINK("http://x")', "+1", "alice", "\tTAB", "\rCR"]
    text = outputs.gradebook_csv([(k, card(k, score=3.5)) for k in keys], ["masks"])
    rows = list(csv.DictReader(io.StringIO(text)))
    students = [r["student"] for r in rows]
    assert (
        students[:4] == ["'-1+B2", "'@A1", '\'=HYPERLINK("http://x")', "'+1"]
        and students[4] == "alice"
    )
    assert all(not s.startswith(("=", "+", "-", "@", "\t", "\r")) for s in students)
    assert all(
        float(r["total"]) == 3.5 and float(r["masks"]) == 3.5 and float(r["max_score"]) == 8
        for r in rows
    )
    assert (
        outputs.csv_cell(-1) == -1
        and outputs.csv_cell(0.5) == 0.5
        and outputs.csv_cell("-1") == "'-1"
    )


def test_a_submission_that_was_not_graded_has_blank_points_with_its_status_beside(tmp_path):
    """An LMS's own export leaves an ungraded submission blank; a 0 here would be uploaded as the grade of a
    student whose zip was corrupt (issue 28, item 5). The Canvas and Moodle files agree."""
    from grader.exports import lms
    from grader.intake.roster import Student

    named = [
        ("alice", card("alice", score=3.5)),
        ("bob", card("bob", error="bob.zip: not a valid zip archive")),
    ]
    rows = {
        r["student"]: r
        for r in csv.DictReader(io.StringIO(outputs.gradebook_csv(named, ["masks"])))
    }
    assert (
        rows["bob"]["masks"],
        rows["bob"]["total"],
        rows["bob"]["status"],
        rows["bob"]["error"],
    ) == ("", "", "error", "intake")
    assert (
        float(rows["alice"]["masks"]),
        float(rows["alice"]["total"]),
        rows["alice"]["status"],
    ) == (3.5, 3.5, "graded")
    lines = lms.join(named, [Student(login="alice"), Student(login="bob"), Student(login="carol")])
    assert [line.grade() for line in lines] == [
        3.5,
        "",
        0,
    ]  # carol: on the roster, nothing submitted


def test_identical_submissions_are_flagged_in_the_summary_and_the_report(tmp_path, assignment):
    stub = outputs.stubs_sha256(assignment)
    assert len(stub) == 64
    named = [
        ("alice", card("alice", sha=SHA["a"])),
        ("bob", card("bob", sha=SHA["b"])),
        ("mallory", card("mallory", sha=SHA["a"])),
        ("trudy", card("trudy", sha=SHA["a"])),
        ("carol", card("carol", sha=SHA["c"])),
        ("stub1", card("stub1", sha=stub)),
        ("stub2", card("stub2", sha=stub)),
        ("err1", card("err1", error="no Python files")),
        ("err2", card("err2", error="no Python files")),
    ]
    summary = finish(named, tmp_path).summary
    assert summary["identical_submissions"] == [
        {"sha256": SHA["a"], "students": ["alice", "mallory", "trudy"]}
    ]
    page = report.render(summary)
    section = page[page.index('<table id="identical">') :]
    section = section[: section.index("</table>")]
    assert "alice, mallory, trudy" in section and "stub1" not in section and "err1" not in section
    assert 'id="identical">None.' in report.render({**summary, "identical_submissions": []})


def test_a_progress_line_cannot_be_forged_by_a_message_or_a_key():
    forged = card("eve", error="bad file x.py\n[2/2] alice: 8/8 in 0.1 s")
    line = progress.describe(
        Result(Entry("eve\n[3/3] bob: 8/8", "eve", Path("/c/eve"), "folder"), forged)
    )
    assert "\n" not in line and "\r" not in line and "\\x0a[2/2] alice" in line


def test_exports_of_a_scorecard_named_dot_dot_stay_inside_the_folder(tmp_path):
    out = tmp_path / "out"
    written = outputs.export([("..", card("x")), ("a/b", card("y"))], "gradescope", out, ["masks"])
    written += outputs.export([("..", card("x"))], "github-classroom", out, ["masks"])
    assert all(out in p.resolve().parents for p in written), written


def _hostile_class(root: Path) -> Path:
    solution = (ROOT / "solutions" / "masks.py").read_text()
    for folder in ("alice/exercises", "mallory/exercises", "-1+B2", "zed\n[9 of 9] alice: 8 of 8"):
        (root / folder).mkdir(parents=True)
        (root / folder / "masks.py").write_text(solution)
    (root / "@A1.py").write_text(solution)
    os.makedirs(os.path.join(os.fsencode(root), b"gr\xfcn"))
    shutil.copy(
        ROOT / "exercises" / "masks.py", os.path.join(os.fsencode(root), b"gr\xfcn", b"masks.py")
    )
    for stub in ("stub1", "stub2"):
        shutil.copytree(ROOT / "exercises", root / stub / "exercises")
    (root / "bob").symlink_to(root / "alice")
    (root / "eve").symlink_to("/proc/self/cwd/solutions")
    os.mkfifo(root / "carol.zip")
    shutil.copy(CORPUS / "hostile" / "intake" / "deep_nesting.ipynb", root / "erin.ipynb")
    shutil.copy(
        CORPUS / "hostile" / "intake" / "source_lines_are_numbers.ipynb", root / "frank.ipynb"
    )
    return root


@pytest.mark.slow
def test_grader_batch_on_a_hostile_class_folder_writes_every_output(tmp_path, capsys):
    from grader.cli.main import main

    klass, out = _hostile_class(tmp_path / "class"), tmp_path / "out"
    code = main(
        [
            "batch",
            str(klass),
            "--out",
            str(out),
            "--exercise",
            "masks",
            "--per-test-time-limit",
            "8",
            "-j",
            "2",
            "--seed",
            "5",
            "--quiet",
            "--export",
            "gradescope",
            "--export",
            "github-classroom",
            "--export",
            "csv",
            "--no-canary",
        ]
    )
    err = capsys.readouterr().err
    assert code == 1 and "intake error" in err and "grader error" not in err, err[
        -3000:
    ]  # 1: some intake errors
    cards = {p.stem: json.loads(p.read_text()) for p in (out / "scorecards").glob("*.json")}
    errors = {k: c["error"]["message"] for k, c in cards.items() if c["status"] == "error"}
    assert set(errors) == {"bob", "eve", "carol", "erin", "frank"}, errors
    assert (
        "symbolic link" in errors["bob"]
        and "symbolic link" in errors["eve"]
        and "FIFO" in errors["carol"]
    )
    assert cards["alice"]["score"] == 8 and cards["eve"]["score"] == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["identical_submissions"] == [
        {
            "sha256": cards["alice"]["submission"]["sha256"],
            "students": ["-1+B2", "alice", "mallory", "zed__9_of_9__alice__8_of_8"],
        }
    ]
    gradebook = (out / "gradebook.csv").read_text("utf-8")
    assert "\n'-1+B2," in gradebook and "\n'@A1," in gradebook
    assert 'id="identical"' in (out / "report.html").read_text("utf-8")
    assert (out / "exports" / "csv" / "gradebook.csv").exists() and len(
        list((out / "exports").rglob("*.json"))
    ) == 2 * len(cards)
    assert not any(line.startswith("[9 of 9]") for line in err.splitlines())
