"""What an infinite loop costs (issue 28, item 6): per-test limits sized from the references' own CPU time (the
canary keeps them), an exercise stopped at its first timeout, a CPU-time timeout never retried (CPU time does not
depend on the machine's load), and every other exercise graded and reported as usual."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil

import pytest

from grader import canary, proofs, schema
from grader.course import manifest
from grader.grade import grade
from grader.sandbox import isolation
from tests.project.support.common import ROOT, needs_namespace, solutions_copy

pytestmark = pytest.mark.cost(40)
EXERCISES = ["softmax", "masks"]
LOOPS = (
    "def softmax_naive(x, dim=-1):\n    while True:\n        pass\n\n\ndef softmax_stable(x, dim=-1):\n"
    "    while True:\n        pass\n"
)


@pytest.fixture(scope="module")
def proof(tmp_path_factory: pytest.TempPathFactory) -> canary.Proof:
    """A proof of its own (a fresh cache): the references graded here, their CPU time kept."""
    old = os.environ.get(canary.CACHE_ENV)
    os.environ[canary.CACHE_ENV] = str(tmp_path_factory.mktemp("cache"))
    try:
        yield canary.prove(manifest.load(None, None), backend="namespace", exercises=EXERCISES)
    finally:
        if old is None:
            os.environ.pop(canary.CACHE_ENV)
        else:
            os.environ[canary.CACHE_ENV] = old


@pytest.fixture(scope="module")
def limits(proof: canary.Proof) -> proofs.TestLimits:
    """The limits every grade derives from the proof (the manifest's ceilings over the references' CPU)."""
    return proof.limits(manifest.load(None, None))


@needs_namespace
def test_the_canary_keeps_per_test_limits_sized_from_the_references(proof, limits):
    assignment = manifest.load(None, None)
    assert proof.cached is False and limits.full
    assert {test_id.split("::")[0] for test_id in limits.full} == {
        "tests/hidden/test_softmax.py",
        "tests/hidden/test_masks.py",
    }
    for test_id, limit in limits.full.items():
        exercise = "softmax" if "softmax" in test_id else "masks"
        assert proofs.FLOOR_S <= limit <= assignment.exercise(exercise).time_limit_s, (
            test_id,
            limit,
        )
        cpu = proof.references[test_id].cpu_s  # the value oracle: FACTOR x the reference's own CPU
        assert limit == round(
            min(assignment.exercise(exercise).time_limit_s, max(proofs.FLOOR_S, 25 * cpu)), 3
        )
    again = proofs.cached(assignment, backend="namespace", exercises=EXERCISES)
    assert (
        again is not None and again.limits(assignment) == limits
    )  # kept in the cache for every later grade
    assert proofs.limit_for(0.01, 10.0) == proofs.FLOOR_S and proofs.limit_for(0.2, 10.0) == 5.0
    assert proofs.limit_for(3.0, 10.0) == 10.0  # never over the manifest's


@needs_namespace
def test_the_cached_proof_stores_the_references_cpu_only_and_a_bad_one_is_made_again(proof):
    """One source: the file keeps each reference test's CPU seconds (schema-checked), never a limit derived
    from them; a file of another schema version, or with a value that is not a CPU time, reads as no proof."""
    stored = json.loads((proofs.cache_dir() / f"{proof.key}.json").read_text("utf-8"))
    schema.validate("proof", stored)
    assert set(stored) == {"schema_version", "solutions", "stubs", "max_score", "references"}
    assert {t: (r["exercise"], r["cpu_s"]) for t, r in stored["references"].items()} == {
        t: tuple(r) for t, r in proof.references.items()
    }
    cpus = [r.cpu_s for r in proof.references.values()]
    assert all(0 <= c < 5 for c in cpus) and max(cpus) > 0  # measured, not a default
    assert proofs.read(proof.key) == dataclasses.replace(proof, cached=True)  # read back whole
    proofs.write("0again", proof)
    first = proofs.read("0again")
    assert proofs.read("0again") is first  # unchanged on disk: not parsed again
    proofs.write("0again", dataclasses.replace(proof, stubs=1.0))  # a new file in its place
    assert proofs.read("0again") == dataclasses.replace(proof, key="0again", stubs=1.0, cached=True)
    for bad in (
        {**stored, "schema_version": 0},
        {**stored, "references": {"t": {"exercise": "softmax", "cpu_s": -1}}},
        {**stored, "references": {"t": {"exercise": "softmax", "cpu_s": True}}},
        {k: v for k, v in stored.items() if k != "references"},
        {**stored, "references": {"t": {"exercise": "", "cpu_s": 0.01}}},
        {**stored, "limits": {}},  # something derived: not a proof file
        [stored],
    ):
        (proofs.cache_dir() / "0bad.json").write_text(json.dumps(bad), "utf-8")
        assert proofs.read("0bad") is None, bad
    (proofs.cache_dir() / "0bad.json").write_bytes(b'{"schema_version": 1, "\xff": 0}')
    assert proofs.read("0bad") is None  # not UTF-8


@needs_namespace
def test_an_infinite_loop_costs_one_limit_per_exercise_and_the_rest_is_graded(limits, tmp_path):
    sub = solutions_copy(tmp_path / "sub")
    (sub / "softmax.py").write_text(LOOPS)
    card = grade(sub, isolation="namespace", exercises=EXERCISES, seed=5)
    assert card["status"] == "graded"  # the student's timeouts, never a grader error
    softmax = [t for e in card["exercises"] if e["id"] == "softmax" for t in e["tests"]]
    first, rest = softmax[0], softmax[1:]
    limit = limits.full[first["id"]]
    assert (
        first["outcome"] == "timeout" and f"({limit:g} s of CPU time per test" in first["message"]
    ), first
    assert (
        limit < manifest.load(None, None).exercise("softmax").time_limit_s
    )  # sized from the reference, not 10 s
    assert rest and all(
        t["outcome"] == "timeout"
        and "not run (an earlier test of this exercise timed out)" in t["message"]
        for t in rest
    )
    assert all(
        t.get("cpu_s", 0.0) == 0.0 for t in rest
    )  # failed without running: no sandbox CPU spent on them
    # one counted timeout, on the first test: at its CPU limit (not retried), or, where a busy machine gave the loop
    # too little CPU to reach it, at the wall-clock backstop, which is retried once on a fresh worker
    assert {i["test"] for i in card["incidents"]} == {first["id"]} and len(card["incidents"]) <= 2
    assert [i for i in card["incidents"] if "retried once" not in i["message"]] == card[
        "incidents"
    ][-1:]
    masks = next(e for e in card["exercises"] if e["id"] == "masks")
    assert (
        masks["score"] == masks["max_score"] > 0
    )  # the next exercise: a fresh worker, full feedback, the reference within the tight limits


@needs_namespace
def test_after_a_submissions_first_timeout_its_later_tests_get_the_tight_limits(limits, tmp_path):
    """One infinite loop pays a full limit; the next exercise's loop pays its tight limit (the
    references' CPU x FACTOR, over a lower floor), and says so; the tight limits are the proof's."""
    assert limits.tight.keys() == limits.full.keys()
    assert all(proofs.TIGHT_FLOOR_S <= limits.tight[t] <= limits.full[t] for t in limits.tight)
    assert proofs.limit_for(0.001, 10.0, proofs.TIGHT_FLOOR_S) == proofs.TIGHT_FLOOR_S
    assert proofs.limit_for(0.2, 10.0, proofs.TIGHT_FLOOR_S) == 5.0  # a heavy test keeps FACTOR
    sub = solutions_copy(tmp_path / "sub")
    (sub / "softmax.py").write_text(LOOPS)
    (sub / "masks.py").write_text(
        "def causal_mask(*a, **k):\n    while True:\n        pass\n\n\n"
        "def padding_mask(*a, **k):\n    while True:\n        pass\n"
    )
    card = grade(sub, isolation="namespace", exercises=EXERCISES, seed=5)
    first = {e["id"]: e["tests"][0] for e in card["exercises"]}
    tight = limits.tight[first["masks"]["id"]]
    assert tight < limits.full[first["masks"]["id"]]
    assert first["masks"]["outcome"] == "timeout" and (
        f"({tight:g} s of CPU time per test, cut from "
        f"{limits.full[first['masks']['id']]:g} s since an earlier test of this submission "
        "timed out" in first["masks"]["message"]
    ), first["masks"]
    assert "cut from" not in first["softmax"]["message"]
    assert card["score"] == 0 and card["status"] == "graded"


@needs_namespace
def test_a_correct_submission_is_graded_as_usual_under_the_same_limits(limits, tmp_path):
    card = grade(
        solutions_copy(tmp_path / "sub"), isolation="namespace", exercises=EXERCISES, seed=5
    )
    assert (
        card["status"] == "graded"
        and card["score"] == card["max_score"] > 0
        and card["incidents"] == []
    )
    tests = [t for e in card["exercises"] for t in e["tests"]]
    assert all(t["cpu_s"] < limits.full[t["id"]] for t in tests if t["id"] in limits.full)


def test_a_cpu_time_timeout_is_not_retried_but_a_wall_clock_one_is(tmp_path, monkeypatch):
    """CPU time does not grow with the machine's load, so running the call again could only double the loop."""
    from grader.sandbox import remote
    from grader.sandbox.channel import ChannelError

    backend = remote.SandboxBackend(
        tmp_path, isolation.LaunchSpec("none"), bans={}, time_limits={"ex": 1.0}, budget_s=60
    )
    calls: list[str] = []
    monkeypatch.setattr(backend, "_drop", lambda exc, where, note="": calls.append(f"drop{note}"))
    for cpu, expected in (
        (True, ["exchange", "drop"]),
        (False, ["exchange", "drop (retried once on a fresh worker)", "exchange", "drop"]),
    ):
        calls.clear()
        backend.timeouts.clear()
        backend.begin_test("t::test", "ex")

        def timing_out(request, cpu=cpu):
            calls.append("exchange")
            raise ChannelError(
                "timeout", "its CPU time ran out" if cpu else "no answer in time", cpu=cpu
            )

        monkeypatch.setattr(backend, "_exchange", timing_out)
        monkeypatch.setattr(backend.history, "replay", lambda exchange: None)
        with pytest.raises(remote.errors.StudentTimeout):
            backend.call("mod", "f", (), {})
        assert calls == expected, (cpu, calls)
        with pytest.raises(
            remote.errors.StudentTimeout, match="an earlier test of this exercise timed out"
        ):
            backend.call("mod", "f", (), {})  # the exercise stopped at its first counted timeout


def test_a_students_own_check_stops_a_looping_exercise_and_keeps_the_others(tmp_path):
    """`grader check` (and the CI run built on it) runs in the student's process: a CPU-time alarm per call, the
    exercise stopped at its first timeout, every other exercise checked as usual."""
    from grader.check import local as check

    student = tmp_path / "exercises"
    shutil.copytree(ROOT / "solutions", student)
    (student / "softmax.py").write_text(LOOPS)
    assignment = dataclasses.replace(
        manifest.load(None, None),
        exercises=[
            dataclasses.replace(e, time_limit_s=1.0) for e in manifest.load(None, None).exercises
        ],
    )
    card = check.check(exercises=["softmax", "masks"], student=student, assignment=assignment)
    softmax = [t for e in card["exercises"] if e["id"] == "softmax" for t in e["tests"]]
    assert (
        softmax[0]["outcome"] == "timeout" and "1 s of CPU time per test" in softmax[0]["message"]
    ), softmax[0]
    assert all(
        "not run (an earlier test of this exercise timed out)" in t["message"] for t in softmax[1:]
    )
    masks = next(e for e in card["exercises"] if e["id"] == "masks")
    assert masks["score"] == masks["max_score"] > 0


def test_the_cpu_left_decides_how_soon_it_is_read_again():
    """A limit is read every 0.1 s, and as often as every 10 ms once less is left: a tight limit of
    0.1 s would otherwise be overshot by a whole poll."""
    from grader.sandbox.channel import CPU_POLL_S, MIN_POLL_S, _poll_in

    assert (CPU_POLL_S, MIN_POLL_S) == (0.1, 0.01)
    assert _poll_in(None, 5.0) == _poll_in(10.0, 1.0) == CPU_POLL_S
    assert _poll_in(1.05, 1.0) == pytest.approx(0.05)
    assert _poll_in(1.001, 1.0) == _poll_in(1.0, 2.0) == MIN_POLL_S
