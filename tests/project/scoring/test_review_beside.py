"""What `grader grade` overlaps: the integrity review made in a forked copy while the tests run, and the
warm worker started on a thread while torch is imported.

The review beside the tests must give the verdict the review made in turn gives (every integrity attack of
the hostile corpus and the references, in a fresh interpreter: an xdist worker has threads, and
`forked.start` forks only a single-threaded process); a copy that fails is made good by a review made in
turn; a copy not asked for is stopped and reaped. The warm start hands over what its thread made, raises
what it raised where the caller waits, and is discarded exactly once.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from grader import forked
from grader.course import manifest
from grader.errors import GraderFault
from grader.intake import submission as intake
from grader.sandbox import choice
from grader.sandbox.warm import WarmStart
from grader.scoring import withhold
from tests.project.support.common import CORPUS, ROOT, solutions_copy
from tests.project.support.hostile_class import attacked_module

pytestmark = pytest.mark.cost(12)

ATTACKS = sorted((CORPUS / "hostile" / "integrity").glob("*.py"))
SIDE_BY_SIDE = r"""
import json, os, sys
from pathlib import Path
from grader.course import manifest
from grader.scoring import withhold

assignment, results = manifest.load(), []
for box in map(Path, sys.argv[1:]):
    alone = withhold.review(box, assignment).to_plain()
    with withhold.begin(box, assignment, None, beside=True) as pending:
        copied = pending.copy is not None
        beside = pending.verdict().to_plain()
    with withhold.begin(box, assignment, None, beside=False) as pending:
        refused = pending.copy is None
    alone["seconds"] = beside["seconds"] = 0.0
    results.append({"copy": copied, "same": alone == beside, "not asked": refused,
                    "withheld": sorted(alone["withheld"]), "findings": len(alone["findings"])})
pending = withhold.begin(Path(sys.argv[1]), assignment, None, beside=True)
pid = pending.copy.pid
pending.__exit__(None, None, None)  # never asked for its verdict: stopped and reaped
try:
    os.waitpid(pid, os.WNOHANG)
    reaped = False
except ChildProcessError:
    reaped = True
print(json.dumps({"results": results, "reaped": reaped}))
"""


def _attacked(folder: Path, attack: Path) -> Path:
    sub = solutions_copy(folder)
    module = attacked_module(attack)
    (sub / f"{module}.py").unlink()
    shutil.copy(attack, sub / f"{module}.py")
    return sub


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="the copy needs a core to spare")
def test_the_review_beside_the_tests_is_the_review_made_in_turn(tmp_path):
    boxes = [ROOT / "solutions"] + [_attacked(tmp_path / attack.stem, attack) for attack in ATTACKS]
    done = subprocess.run(
        [sys.executable, "-I", "-c", SIDE_BY_SIDE, *map(str, boxes)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    results = report["results"]
    assert len(results) == len(ATTACKS) + 1
    assert all(r["copy"] and r["not asked"] for r in results), (
        results
    )  # forked, and only when asked
    assert all(r["same"] for r in results), [
        (b.name, r) for b, r in zip(boxes, results) if not r["same"]
    ]
    assert results[0]["findings"] == 0  # the references: nothing found
    # the comparison covers verdicts that cost points, not only empty ones
    assert sum(bool(r["withheld"]) for r in results) >= 10, results
    assert report["reaped"]


class _FailedCopy:
    """A copy whose result is a fault (it died, or the review raised there)."""

    pid = 0

    def __init__(self, fault: Exception) -> None:
        self.fault, self.cancelled = fault, False

    def result(self) -> object:
        raise self.fault

    def cancel(self) -> None:
        self.cancelled = True


@pytest.mark.parametrize(
    "fault",
    [forked.ForkedFault("a forked grading process ended without a result"), KeyError("findings")],
)
def test_a_copy_that_fails_leaves_the_review_to_this_process(tmp_path, fault):
    sub = _attacked(tmp_path / "sub", CORPUS / "hostile" / "integrity" / "class_attribute_alias.py")
    assignment = manifest.load()
    made = withhold.review(sub, assignment)
    assert made.withheld  # a verdict that costs points
    with withhold.Pending(_FailedCopy(fault), lambda: withhold.review(sub, assignment)) as pending:  # type: ignore[arg-type]
        again = pending.verdict()
    assert again.to_plain() | {"seconds": 0} == made.to_plain() | {"seconds": 0}


def test_a_copy_not_asked_for_is_cancelled_and_a_plain_round_trip_keeps_every_field(tmp_path):
    copy = _FailedCopy(forked.ForkedFault("unused"))
    with withhold.Pending(copy, lambda: None):  # type: ignore[arg-type]
        pass
    assert copy.cancelled
    sub = _attacked(tmp_path / "sub", CORPUS / "hostile" / "integrity" / "frame_walk.py")
    made = withhold.review(sub, manifest.load())
    back = withhold.Review.from_plain(json.loads(json.dumps(made.to_plain())))
    assert back == made and back.to_list() == made.to_list() and made.findings


class _Made:
    def __init__(self) -> None:
        self.discarded = 0

    def discard(self) -> None:
        self.discarded += 1


class _Launch:
    """A launch spec's part a warm start reads before its thread starts: the uid lease."""

    def __init__(self) -> None:
        self.leased = 0

    @property
    def uid(self) -> int:
        self.leased += 1
        return 60000


def test_a_warm_start_hands_over_what_its_thread_made_once_it_is_made():
    release, made, launch = threading.Event(), _Made(), _Launch()

    def make() -> _Made:
        release.wait(60)
        return made

    start = WarmStart(make, launch, on_thread=True)  # type: ignore[arg-type]
    assert launch.leased == 1  # leased here, not on the thread (its /proc reads wait for the GIL)
    assert start._thread is not None and start._thread.is_alive()  # get() waits for the thing
    release.set()
    assert start.get() is made and not start._thread.is_alive()
    start.discard()
    assert made.discarded == 1


def test_a_cold_warm_start_is_made_at_once_on_this_thread():
    made, launch = _Made(), _Launch()
    start = WarmStart(lambda: made, launch, on_thread=False)  # type: ignore[arg-type]
    assert start._thread is None and start._made is made
    assert start.get() is made


@pytest.mark.parametrize("on_thread", [True, False])
def test_a_warm_start_raises_what_its_start_raised_where_the_caller_waits(on_thread):
    def make() -> None:
        raise GraderFault("no safe folder for the sandbox's library")

    start = WarmStart(make, _Launch(), on_thread=on_thread)  # type: ignore[arg-type]
    with pytest.raises(GraderFault, match="no safe folder"):
        start.get()
    start.discard()  # nothing was made: nothing to kill, and no second raise
    assert WarmStart(lambda: None, _Launch(), on_thread=on_thread).get() is None  # type: ignore[arg-type]


@pytest.mark.skipif(
    "namespace" not in choice.available(), reason="needs the namespace sandbox (root on Linux)"
)
def test_grader_grade_shows_the_verdict_of_the_review_made_in_turn(tmp_path):
    """End to end: the card of `grader grade` (review beside the tests) holds the findings and withheld
    exercises the review made in turn gives for the same staged files."""
    sub = _attacked(tmp_path / "sub", CORPUS / "hostile" / "integrity" / "pops_function_mode.py")
    done = subprocess.run(
        [sys.executable, "-I", "-m", "grader", "grade", str(sub), "--no-canary", "--json"]
        + ["--isolation", "namespace", "--seed", "3"],
        capture_output=True,
        text=True,
        cwd="/",
        env={**os.environ, "GRADER_KEEP_WARM": "0"},
        timeout=600,
    )
    assert done.returncode in (0, 1), done.stderr[-2000:]
    card = json.loads(done.stdout)
    assignment = manifest.load()
    taken = intake.take(sub, modules={e.module for e in assignment.exercises})
    try:
        alone = withhold.review(taken.box, assignment, taken.single_module)
    finally:
        taken.cleanup()
    assert card["integrity"] == alone.to_list() and alone.withheld
    assert {e["id"]: e.get("withheld") for e in card["exercises"] if e.get("withheld")} == (
        alone.withheld
    )


class _NoLease:
    @property
    def uid(self) -> int:
        raise OSError("no uid free for the slot")


def test_a_warm_start_whose_lease_fails_is_a_start_that_failed():
    made = []
    start = WarmStart(lambda: made.append(1), _NoLease(), on_thread=True)  # type: ignore[arg-type]
    assert start.get() is None and start._thread is None and not made  # a cold one comes later
