"""The canary: a grader that cannot grade refuses instead of scoring (and writes no student scorecard).

A broken course checkout stands in for a broken machine: a reference solution that raises the very
error a missing numpy once caused, or stubs that pass. The proof is cached per configuration.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from grader import canary
from grader.cli.main import main
from grader.course import manifest
from grader.sandbox import isolation
from grader.sandbox.starters import Worker, ZygoteStarter
from grader.sandbox.zygote_client import Zygote

pytestmark = pytest.mark.cost(18)  # seconds on 2 cores: started early (tests/project/conftest.py)

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(canary.CACHE_ENV, str(tmp_path / "cache"))


def _course(tmp_path: Path, *, break_solution: bool = False, solve_stub: bool = False) -> Path:
    course = tmp_path / "course"
    for part in ("solutions", "exercises", "tests/hidden"):
        shutil.copytree(ROOT / part, course / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "assignments.json", course / "assignments.json")
    if break_solution:
        path = course / "solutions" / "softmax.py"
        text = path.read_text()
        assert "    shifted = x - x.amax" in text
        path.write_text(
            text.replace(
                "    shifted = x - x.amax",
                '    raise RuntimeError("Numpy is not available")\n    shifted = x - x.amax',
                1,
            )
        )
    if solve_stub:
        shutil.copy(ROOT / "solutions" / "softmax.py", course / "exercises" / "softmax.py")
    return course


def test_a_broken_reference_is_refused_with_the_reason(tmp_path):
    assignment = manifest.load(_course(tmp_path, break_solution=True) / "assignments.json")
    with pytest.raises(canary.CanaryFailed) as caught:
        canary.prove(assignment, backend="namespace", exercises=["softmax"])
    message = str(caught.value)
    assert message.startswith("reference solutions scored 1.5/6 here (expected 6/6)")
    assert "RuntimeError: softmax.softmax_stable: Numpy is not available" in message
    assert not list(canary.cache_dir().glob("*.json"))  # a failed proof is never cached


def test_stubs_that_score_are_refused(tmp_path):
    assignment = manifest.load(_course(tmp_path, solve_stub=True) / "assignments.json")
    with pytest.raises(
        canary.CanaryFailed, match=r"stubs \(exercises/\) scored 6/6 here \(expected 0/6\)"
    ):
        canary.prove(assignment, backend="namespace", exercises=["softmax"])


def test_a_good_proof_is_cached_per_configuration(tmp_path):
    assignment = manifest.load()
    first = canary.prove(assignment, backend="namespace", exercises=["softmax"])
    assert (first.solutions, first.stubs, first.max_score, first.cached) == (6, 0, 6, False)
    again = canary.prove(assignment, backend="namespace", exercises=["softmax"])
    assert again.cached and again.key == first.key
    other = canary.cache_key(
        assignment, backend="process", exercises=["softmax"], per_test_time_limit=None
    )
    assert other != first.key  # another backend must prove itself again


def test_the_proof_runs_on_the_workers_it_is_given():
    """`grader grade` and `grader batch` hand the canary their zygote: references and stubs fork from it."""
    zygote = Zygote()
    assert zygote.wait_ready()
    forked: list[bool] = []

    class Recording(ZygoteStarter):
        def start(
            self, spec: isolation.LaunchSpec, box: Path, *, last_attempt: bool = False
        ) -> Worker:
            worker = super().start(spec, box, last_attempt=last_attempt)
            forked.append(worker.channel.forked)
            return worker

    try:
        proof = canary.prove(
            manifest.load(), backend="namespace", exercises=["masks"], starter=Recording(zygote)
        )
    finally:
        zygote.close()
    assert (proof.solutions, proof.stubs, proof.cached) == (8, 0, False)
    assert forked == [True, True]  # one worker for the references, one for the stubs, both forked


def test_grade_cli_refuses_and_writes_no_card(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(
        manifest, "DEFAULT_MANIFEST", _course(tmp_path, break_solution=True) / "assignments.json"
    )
    out = tmp_path / "card.json"
    assert main(["grade", str(ROOT / "solutions"), "--out", str(out)]) == 3
    assert not out.exists()
    assert "refusing to grade: reference solutions scored" in capsys.readouterr().err


def test_batch_cli_refuses_and_writes_no_scorecard(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(
        manifest, "DEFAULT_MANIFEST", _course(tmp_path, break_solution=True) / "assignments.json"
    )
    klass = tmp_path / "class"
    klass.mkdir()
    shutil.copy(ROOT / "examples" / "submissions" / "frank.py", klass / "frank.py")
    out = tmp_path / "out"
    assert main(["batch", str(klass), "--out", str(out), "--exercise", "softmax", "--quiet"]) == 3
    assert not list(out.glob("scorecards/*.json"))
    assert "Numpy is not available" in capsys.readouterr().err


def test_cards_and_summary_record_the_canary(tmp_path):
    klass = tmp_path / "class"
    klass.mkdir()
    shutil.copy(ROOT / "examples" / "submissions" / "frank.py", klass / "frank.py")
    out = tmp_path / "out"
    assert main(["batch", str(klass), "--out", str(out), "--exercise", "softmax", "--quiet"]) == 0
    card = json.loads((out / "scorecards" / "frank.json").read_text())
    summary = json.loads((out / "summary.json").read_text())
    assert card["canary"]["solutions"] == 6 and card["canary"]["stubs"] == 0
    assert summary["canary"]["key"] == card["canary"]["key"]


# -- prove, then grade: canary.attest, the one decision of grader grade, batch, Gradescope and a Dask host --


def test_attest_with_the_canary_off_proves_nothing_and_attests_nothing(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("nothing may be proven, looked up or started with the canary off")

    for name in ("prove", "cached", "zygote_for_proof"):
        monkeypatch.setattr(canary, name, refuse)
    said: list[str] = []
    got = canary.attest(
        manifest.load(), backend="namespace", enabled=False, fork=True, say=said.append
    )
    assert got == canary.Attested(None, None) and said == []


def test_attest_announces_a_due_proof_then_says_it_and_a_cached_one_is_only_said():
    assignment = manifest.load()
    first: list[str] = []
    made = canary.attest(assignment, backend="namespace", exercises=["softmax"], say=first.append)
    assert made.record is not None and made.zygote is None  # fork=False: cold workers
    assert (made.record["solutions"], made.record["stubs"], made.record["cached"]) == (6, 0, False)
    assert first[0] == canary.PROVING and len(first) == 2
    assert first[1].startswith("canary: reference solutions 6/6, stubs 0/6 (proven in ")
    again: list[str] = []
    kept = canary.attest(assignment, backend="namespace", exercises=["softmax"], say=again.append)
    assert kept.record == {**made.record, "cached": True}
    assert again == ["canary: reference solutions 6/6, stubs 0/6 (cached proof)"]


class _Zygote:
    closed = False

    def close(self) -> None:
        self.closed = True


def test_attest_forks_the_proof_from_the_zygote_it_started_and_closes_it_when_the_proof_fails(
    monkeypatch,
):
    zygote, starters = _Zygote(), []
    monkeypatch.setattr(canary, "zygote_for_proof", lambda *a, **k: zygote)

    def fail(*args, starter=None, **kwargs):
        starters.append(starter)
        raise canary.CanaryFailed("reference solutions scored 0/6 here")

    monkeypatch.setattr(canary, "prove", fail)
    with pytest.raises(canary.CanaryFailed, match="scored 0/6"):
        canary.attest(manifest.load(), backend="namespace", fork=True)
    assert zygote.closed and isinstance(starters[0], ZygoteStarter)
    assert starters[0].zygote is zygote


def test_attest_hands_the_zygote_to_the_caller_when_the_proof_holds(monkeypatch):
    zygote = _Zygote()
    monkeypatch.setattr(canary, "zygote_for_proof", lambda *a, **k: zygote)
    proof = canary.Proof("k", 6.0, 0.0, 6.0, cached=True)
    monkeypatch.setattr(canary, "prove", lambda *a, **k: proof)
    got = canary.attest(manifest.load(), backend="namespace", fork=True)
    assert got == canary.Attested(proof.record(), zygote) and not zygote.closed


def test_a_dask_hosts_check_reports_a_failed_or_switched_off_canary_instead_of_refusing(tmp_path):
    """The host does not refuse: it reports, and the coordinator refuses (grader.cluster.messages)."""
    from grader.batch import hostcheck

    broken = manifest.load(_course(tmp_path, break_solution=True) / "assignments.json")
    failed = hostcheck._canary(broken, {"exercises": ["softmax"]})
    assert failed["canary"] is None
    assert failed["canary_error"].startswith("reference solutions scored 1.5/6 here")
    off = hostcheck._canary(broken, {"canary": False})
    assert off == {"canary": None, "canary_error": "the canary was switched off"}
