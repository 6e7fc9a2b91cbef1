"""`grader batch` end to end on a small class: scorecards, errors that never stop the batch, a dead slot
replaced, gradebook, summary, exports, the report in headless Chromium, resumption and --force.

Only the softmax exercise is graded (``--exercise``) to keep the runs short.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from grader import schema
from grader.batch.slot import FAULT_ENV
from grader.cli.main import main
from tests.project.support import pngpixels
from tests.project.support.common import CORPUS, ROOT, expect_batch_exports

pytestmark = pytest.mark.cost(64)  # seconds on 2 cores: started early (tests/project/conftest.py)

CHROMIUM = "/usr/bin/chromium"
FAST = ["--exercise", "softmax", "--per-test-time-limit", "8", "-j", "2", "--seed", "5"]


def _make_class(root: Path) -> Path:
    (root / "alice").mkdir(parents=True)
    shutil.copy(ROOT / "solutions" / "softmax.py", root / "alice" / "softmax.py")
    with zipfile.ZipFile(root / "bob.zip", "w") as zf:
        zf.write(CORPUS / "buggy" / "softmax" / "stable_without_max.py", "bob/softmax.py")
    (root / "broken.zip").write_bytes(b"PK\x03\x04 truncated")
    with zipfile.ZipFile(root / "sneaky.zip", "w") as zf:
        zf.writestr("../softmax.py", "x = 1\n")
    (root / "carol").mkdir()
    shutil.copy(ROOT / "solutions" / "softmax.py", root / "carol" / "softmax.py")
    shutil.copy(ROOT / "solutions" / "softmax.py", root / "carol.py")
    (root / "doomed").mkdir()
    shutil.copy(ROOT / "solutions" / "softmax.py", root / "doomed" / "softmax.py")
    return root


def _cards(out: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted((out / "scorecards").glob("*.json"))}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("batch")
    klass, out = _make_class(base / "class"), base / "out"
    os.environ[FAULT_ENV] = "doomed"  # the slot grading "doomed" dies: the engine must replace it
    try:
        code = main(
            [
                "batch",
                str(klass),
                "--out",
                str(out),
                *FAST,
                "--export",
                "gradescope",
                "--export",
                "github-classroom",
                "--export",
                "csv",
            ]
        )
    finally:
        del os.environ[FAULT_ENV]
    return klass, out, code


def test_every_entry_gets_a_valid_scorecard_and_errors_never_stop_the_batch(graded):
    _, out, code = graded
    cards = _cards(out)
    assert set(cards) == {
        "alice",
        "bob",
        "broken",
        "sneaky",
        "carol@carol",
        "carol@carol.py",
        "doomed",
    }
    for card in cards.values():
        schema.validate("scorecard", card)
    assert (cards["alice"]["status"], cards["alice"]["score"], cards["alice"]["max_score"]) == (
        "graded",
        6,
        6,
    )
    assert (
        cards["alice"]["isolation"]["threads"] == 1
        and cards["alice"]["submission"]["student"] == "alice"
    )
    assert cards["bob"]["status"] == "graded" and 0 <= cards["bob"]["score"] < 6
    assert (
        cards["broken"]["error"]["kind"] == "intake"
        and "not a valid zip" in cards["broken"]["error"]["message"]
    )
    assert (
        cards["sneaky"]["error"]["kind"] == "intake"
        and "escapes the archive" in cards["sneaky"]["error"]["message"]
    )
    for key in ("carol@carol", "carol@carol.py"):
        assert (
            cards[key]["error"]["kind"] == "intake"
            and "claimed by 2 entries" in cards[key]["error"]["message"]
        )
    assert code == 1  # "doomed" ended in a grader error, and the exit status says so


def test_a_slot_that_dies_is_replaced_and_its_submission_gets_a_grader_error(graded):
    _, out, _ = graded
    doomed = _cards(out)["doomed"]
    assert (
        doomed["status"] == "error"
        and doomed["error"]["kind"] == "grader"
        and doomed["max_score"] == 6
    )
    assert (
        "slot process ended" in doomed["error"]["message"] and "rerun" in doomed["error"]["message"]
    )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["timing"]["slot_deaths"] >= 1


def test_gradebook_and_summary_contents(graded):
    _, out, _ = graded
    rows = {r["student"]: r for r in csv.DictReader((out / "gradebook.csv").open())}
    assert set(rows) == set(_cards(out))
    assert rows["alice"]["softmax"] == "6" or float(rows["alice"]["softmax"]) == 6
    assert rows["broken"]["status"] == "error" and rows["broken"]["error"] == "intake"
    assert rows["alice"]["isolation"] in ("namespace", "bwrap", "process", "none")
    summary = json.loads((out / "summary.json").read_text())
    schema.validate("summary", summary)
    assert summary["counts"] == {
        "submissions": 7,
        "graded": 2,
        "errors": 5,
        "skipped": 0,
        "timeouts": 0,
        "full_marks": 1,
        "missing": 0,
    }
    assert (
        summary["score"]["max"] == 6
        and summary["score"]["max_score"] == 6
        and summary["exercises"][0]["id"] == "softmax"
    )
    assert summary["exercises"][0]["pass_rate"] == 0.5
    assert {e["student"] for e in summary["errors"]} == {
        "broken",
        "sneaky",
        "carol@carol",
        "carol@carol.py",
        "doomed",
    }
    assert sum(b["count"] for b in summary["histogram"]) == 2


def test_batch_exports_are_valid_and_carry_real_points(graded):
    _, out, _ = graded
    expect_batch_exports(out, _cards(out))


def test_export_command_formats(graded, tmp_path, capsys):
    _, out, _ = graded
    alice, bob = out / "scorecards" / "alice.json", out / "scorecards" / "bob.json"
    assert main(["export", "--format", "gradescope", str(alice)]) == 0
    gs = json.loads(capsys.readouterr().out)
    schema.validate("gradescope-results", gs)
    assert gs["score"] == 6
    assert main(["export", "--format", "csv", str(alice), str(bob)]) == 0
    assert [r["student"] for r in csv.DictReader(capsys.readouterr().out.splitlines())] == [
        "alice",
        "bob",
    ]
    assert (
        main(
            ["export", "--format", "github-classroom", str(alice), str(bob), "--out", str(tmp_path)]
        )
        == 0
    )
    schema.validate("github-classroom", json.loads((tmp_path / "bob.json").read_text()))
    assert main(["export", "--format", "github-classroom", str(alice), str(bob)]) == 2
    assert "give --out DIR" in capsys.readouterr().err
    (tmp_path / "junk.json").write_text("{}")
    assert main(["export", "--format", "csv", str(tmp_path / "junk.json")]) == 2


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--enable-logging=stderr",
            "--v=0",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_report_renders_in_headless_chromium_with_the_summary_numbers(graded, tmp_path):
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(
            "Debian's chromium is not installed (apt-get install chromium): report not verified"
        )
    _, out, _ = graded
    # `#sort=total` makes the page's own script sort the students table on load: it ran, under the page's CSP
    done = _chromium(tmp_path, "--dump-dom", (out / "report.html").as_uri() + "#sort=total")
    assert done.returncode == 0, done.stderr[-2000:]
    dom, console = done.stdout, [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []
    s = json.loads((out / "summary.json").read_text())
    for anchor, value in [
        ("n-submissions", s["counts"]["submissions"]),
        ("n-graded", s["counts"]["graded"]),
        ("n-errors", s["counts"]["errors"]),
        ("n-full", s["counts"]["full_marks"]),
        ("score-mean", f"{s['score']['mean']:g}"),
        ("score-median", f"{s['score']['median']:g}"),
    ]:
        assert f'id="{anchor}">{value}<' in dom or f'id="{anchor}" class="err">{value}<' in dom, (
            anchor
        )
    assert '<svg id="histogram"' in dom and dom.count("<rect") == len(s["histogram"])
    assert "claimed by 2 entries" in dom and dom.count("<script") == 1
    for failure in s["common_failures"]:
        assert str(failure["count"]) in dom
    order = re.findall(r'<tr class="(?:graded|error|missing)" id="student-([^"]+)"', dom)
    assert sorted(order) == sorted(_cards(out)) and order[0] == "alice"  # highest total first
    assert 'data-col="total" class="n" aria-sort="descending"' in dom
    bob = dom[dom.index('id="student-bob"') : dom.index("</tr>", dom.index('id="student-bob"'))]
    assert "<details><summary>" in bob and "softmax" in bob  # bob's failing tests, one click away
    shot = tmp_path / "report.png"
    done = _chromium(
        tmp_path,
        "--hide-scrollbars",
        "--window-size=1300,1400",
        f"--screenshot={shot}",
        (out / "report.html").as_uri(),
    )
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    width, height, colours = pngpixels.colours(shot)
    assert (width, height) == (1300, 1400)
    assert colours[(59, 125, 216)] > 2000  # histogram bars (#3b7dd8) drawn
    assert (
        sum(n for rgb, n in colours.items() if sum(rgb) < 200) > 3000
    )  # dark text: the page is not blank
    shutil.copy(
        shot, out / "report-screenshot.png"
    )  # kept next to the report for a human to look at


def test_rerun_skips_unchanged_retries_grader_errors_and_force_regrades(graded, capsys):
    klass, out, _ = graded
    before = _cards(out)
    assert (
        main(["batch", str(klass), "--out", str(out), *FAST]) == 1
    )  # the two bad archives are intake errors
    err = capsys.readouterr().err
    assert re.search(r"\d submission\(s\) ended in an intake error", err)
    after = _cards(out)
    assert "alice: unchanged, kept" in err and "bob: unchanged, kept" in err
    assert after["alice"] == before["alice"] and after["bob"] == before["bob"]
    assert (
        after["doomed"]["status"] == "graded" and after["doomed"]["score"] == 6
    )  # a grader error is retried
    summary = json.loads((out / "summary.json").read_text())
    assert (
        summary["counts"]["skipped"] == 2
    )  # alice and bob; bad archives have no content hash: re-checked
    (klass / "alice" / "softmax.py").write_text(
        (CORPUS / "buggy" / "softmax" / "naive_sums_dim0.py").read_text()
    )
    assert main(["batch", str(klass), "--out", str(out), *FAST]) == 1
    err = capsys.readouterr().err
    assert "alice: unchanged" not in err and "bob: unchanged, kept" in err
    assert _cards(out)["alice"]["submission"]["sha256"] != before["alice"]["submission"]["sha256"]
    assert main(["batch", str(klass), "--out", str(out), *FAST, "--force"]) == 1
    err = capsys.readouterr().err
    assert "unchanged, kept" not in err
    assert _cards(out)["bob"]["timings"]["started"] != before["bob"]["timings"]["started"]


@pytest.mark.parametrize("warm", ["fork", "start"])
def test_killing_a_hostile_worker_spares_the_next_warm_worker(tmp_path, capsys, warm):
    """Under the root ``process`` backend a kill clears the worker's whole cgroup: a pre-started worker for
    the next submission must live in another one (slot lanes), or an honest student would lose points;
    a forked one must come from a zygote the kill did not touch."""
    klass = tmp_path / "class"
    for name, source in [
        ("a1", CORPUS / "hostile" / "infinite_loop.py"),
        ("a2", ROOT / "solutions" / "softmax.py"),
        ("a3", ROOT / "solutions" / "softmax.py"),
    ]:
        (klass / name).mkdir(parents=True)
        shutil.copy(source, klass / name / "softmax.py")
    code = main(
        [
            "batch",
            str(klass),
            "--out",
            str(tmp_path / "out"),
            "--isolation",
            "process",
            "-j",
            "1",
            "--exercise",
            "softmax",
            "--per-test-time-limit",
            "1",
            "--quiet",
            "--warm",
            warm,
        ]
    )  # the loop: 3 x 1 s
    assert code == 0, capsys.readouterr().err
    cards = _cards(tmp_path / "out")
    assert all(
        c["isolation"]["worker_forks"] == (c["isolation"]["worker_starts"] if warm == "fork" else 0)
        for c in cards.values()
    )
    assert cards["a1"]["score"] == 0 and any(
        i["kind"] == "timeout" for i in cards["a1"]["incidents"]
    )
    assert (cards["a2"]["score"], cards["a3"]["score"]) == (6, 6), [
        cards[k]["incidents"] for k in ("a2", "a3")
    ]
