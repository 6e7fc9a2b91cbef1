"""A machine's first run proves the grader beside the student's grade (grader.canary_beside).

The student's card from a first run must be the card a later run (proof cached) gives with the same seed,
for a correct submission and for one that loops (its grade made under the floor limits is then made again
under the proof's: the second timeout's "cut from" message is the proof's tight limit, which the floor
limits never give); a machine that cannot grade still refuses and shows no card; Ctrl-C leaves no process
behind. The CLI runs in a fresh interpreter: an xdist worker has threads, and `forked.start` forks only a
single-threaded process (tested too, with the pipe's failure modes).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader import canary, proofs
from grader.course import manifest
from grader.options import GradeOptions
from tests.project.support.common import ROOT, small_course

pytestmark = pytest.mark.cost(45)

GRADER = [sys.executable, "-I", "-m", "grader"]
LOOP = "    while True:  # an infinite loop\n        pass\n"


@pytest.fixture
def course(tmp_path: Path) -> Path:
    """The course reduced to softmax and simple_attention (short grades, a short proof)."""
    return small_course(tmp_path / "course").parent


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, canary.CACHE_ENV: str(tmp_path / "cache"), "GRADER_KEEP_WARM": "5"}


def _grade(sub: Path, course: Path, env: dict[str, str]) -> tuple[int, dict, str]:
    done = subprocess.run(
        [*GRADER, "grade", str(sub), "--manifest", str(course / "assignments.json")]
        + ["--seed", "7", "--json"],
        capture_output=True,
        text=True,
        cwd="/",
        env=env,
        timeout=600,
    )
    return done.returncode, json.loads(done.stdout or "{}"), done.stderr


def _proofs(env: dict[str, str]) -> list[Path]:
    """The proof files cached under this test's cache root."""
    return list(Path(env[canary.CACHE_ENV]).glob("*/canary/*.json"))


def _tests(card: dict) -> dict[str, tuple[str, str, float]]:
    return {
        t["id"]: (t["outcome"], t["message"], t["points"])
        for e in card["exercises"]
        for t in e["tests"]
    }


def _looping(tmp_path: Path) -> Path:
    sub = tmp_path / "loops"
    sub.mkdir()
    for name, line in (
        ("softmax.py", "    shifted = x - x.amax"),
        ("simple_attention.py", "    return inputs @ inputs.transpose(-2, -1)"),
    ):
        text = (ROOT / "solutions" / name).read_text()
        assert line in text
        (sub / name).write_text(text.replace(line, LOOP + line, 1))
    return sub


@pytest.mark.parametrize("which", ["solutions", "loops"])
def test_a_first_run_gives_the_card_a_later_run_gives(tmp_path, course, env, which):
    sub = course / "solutions" if which == "solutions" else _looping(tmp_path)
    code, first, said = _grade(sub, course, env)
    assert code == 0 and first["canary"]["cached"] is False, said[-3000:]
    assert said.index("proving the grader first") < said.index("canary: reference solutions 14/14")
    assert len(_proofs(env)) == 1  # the proof, cached
    code, later, said = _grade(sub, course, env)
    assert code == 0 and later["canary"]["cached"] is True, said[-3000:]
    assert _tests(first) == _tests(later) and first["score"] == later["score"]
    if which == "solutions":
        assert first["score"] == 14 and not first["incidents"]
        return
    timeouts = [m for _, m, _ in _tests(first).values() if "ran past its time limit" in m]
    assert len(timeouts) == 2 and "cut from" in timeouts[1], timeouts  # the proof's tight limit
    assert 0 < first["score"] < 14


def test_a_first_run_that_cannot_grade_refuses_and_caches_nothing(tmp_path, course, env):
    path = course / "solutions" / "softmax.py"
    line = "    shifted = x - x.amax"
    path.write_text(path.read_text().replace(line, "    raise RuntimeError('no')\n" + line, 1))
    out = tmp_path / "card.json"
    done = subprocess.run(
        [*GRADER, "grade", str(ROOT / "solutions"), "--manifest", str(course / "assignments.json")]
        + ["--out", str(out)],
        capture_output=True,
        text=True,
        cwd="/",
        env=env,
        timeout=600,
    )
    assert done.returncode == 3 and "refusing to grade: reference solutions scored" in done.stderr
    assert not out.exists() and not _proofs(env)
    assert '"score"' not in done.stdout  # no card shown either


def test_ctrl_c_while_proving_leaves_no_process_of_the_command(course, env):
    proc = subprocess.Popen(
        [*GRADER, "grade", str(ROOT / "solutions"), "--manifest", str(course / "assignments.json")],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        cwd="/",
        env=env,
        start_new_session=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:  # waits for the thing: the proof has started
        if "proving the grader first" in line:
            break
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole group
    assert proc.wait(timeout=120) == 130
    assert "interrupted" in proc.stderr.read()
    deadline = time.monotonic() + 60
    while _in_session(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _in_session(proc.pid)  # its forked copies gone (the zygote has its own session)
    assert not _proofs(env)


def _in_session(sid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def test_forked_returns_values_faults_and_deaths_and_refuses_with_threads():
    code = """
import json, os, signal, threading, time
from grader import forked
def ask(work):
    copy = forked.start(work)
    try:
        return ["value", copy.result()]
    except forked.ForkedFault as exc:
        return ["fault", str(exc)]
def boom():
    raise ValueError("bad input")
sleeper = forked.start(lambda: time.sleep(600))
t0 = time.monotonic(); sleeper.cancel(); took = time.monotonic() - t0
out = [ask(lambda: {"a": [1, 2.5, "x"]}), ask(boom), ask(lambda: os._exit(3)),
       ask(lambda: os.kill(os.getpid(), signal.SIGKILL)), [sleeper.done, took < 5]]
stop = threading.Event(); threading.Thread(target=stop.wait).start()
out.append(forked.start(lambda: 1) is None); stop.set()
print(json.dumps(out))
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    value, fault, exited, killed, cancelled, with_thread = json.loads(done.stdout)
    assert value == ["value", {"a": [1, 2.5, "x"]}]
    assert fault == ["fault", "ValueError: bad input"]
    assert exited == ["fault", "a forked grading process ended without a result (exit status 3)"]
    assert killed == [
        "fault",
        "a forked grading process ended without a result (killed by signal 9)",
    ]
    assert cancelled == [True, True] and with_thread is True


def test_a_forked_copy_leases_its_own_uid_after_forget(tmp_path):
    code = """
import json
from grader import forked
from grader.sandbox import uids
mine = uids.lease_for_slot(0).uid
def lease():
    return uids.lease_for_slot(0).uid
print(json.dumps([mine, forked.start(lease).result(), forked.start(lease, after_fork=uids.forget).result()]))
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    if done.returncode != 0 and "UidLeaseError" in done.stderr:
        pytest.skip("no uid lease folder usable here")
    mine, inherited, own = json.loads(done.stdout)
    assert inherited == mine  # the hazard: without forget, the copy would use the parent's uid
    assert own != mine


def test_while_proving_is_never_above_a_limit_a_proof_could_set():
    ceilings = {"a": 10.0, "b": 0.5, "c": 30.0}
    floor = proofs.while_proving(ceilings)
    assert floor == {"a": 1.0, "b": 0.5, "c": 1.0}
    for exercise, ceiling in ceilings.items():
        for cpu in (0.0, 0.001, 0.04, 0.5, 3.0, 100.0):
            assert floor[exercise] <= proofs.limit_for(cpu, ceiling)


def _card(status: str = "graded", kinds: tuple[str, ...] = (), error: str = "") -> dict:
    card = {"status": status, "incidents": [{"kind": k, "test": "t", "message": ""} for k in kinds]}
    if error:
        card["error"] = {"kind": error, "message": "m"}
    return card


@pytest.mark.parametrize(
    ("card", "holds"),
    [
        (_card(), True),
        (_card(kinds=("crash", "output")), True),
        (_card(kinds=("crash", "timeout")), False),
        (_card("error", error="grader"), False),
        (_card("error", error="intake"), True),
    ],
)
def test_a_provisional_card_holds_unless_a_test_timed_out_or_the_grader_failed(card, holds):
    assert proofs.provisional_holds(card) is holds


def test_a_grade_beside_its_proof_uses_the_floors_and_otherwise_the_proofs_limits(
    monkeypatch, tmp_path
):
    monkeypatch.setenv(canary.CACHE_ENV, str(tmp_path / "cache"))
    assignment = manifest.load()
    key = proofs.cache_key(
        assignment, backend="namespace", exercises=None, per_test_time_limit=None
    )
    test = "tests/hidden/test_softmax.py::test_x"
    refs = {test: proofs.Reference("softmax", 0.2)}
    proofs.write(key, proofs.Proof(key, 100, 0, 100, cached=False, references=refs))
    ceilings = assignment.time_limits()
    pending = proofs.for_grade(assignment, GradeOptions(proof_pending=True), "namespace")
    assert pending == (proofs.while_proving(ceilings), proofs.TestLimits({}, {}))
    after = proofs.for_grade(assignment, GradeOptions(), "namespace")
    assert after[0] == ceilings and after[1].full == {test: 5.0} and after[1].tight == {test: 5.0}
    fixed = GradeOptions(proof_pending=True, per_test_time_limit=3.0)
    assert proofs.for_grade(assignment, fixed, "namespace")[0] == assignment.time_limits(3.0)


def test_a_grade_beside_its_proof_stops_at_its_first_timeout_without_a_retry(tmp_path, monkeypatch):
    """It is graded again after any timeout: a retry (a sleeper's second wait) or another exercise's
    loop would only make the first run longer."""
    from grader.sandbox import isolation, remote
    from grader.sandbox.channel import ChannelError

    backend = remote.SandboxBackend(
        tmp_path,
        isolation.LaunchSpec("none"),
        bans={},
        time_limits={"a": 1.0, "b": 1.0},
        budget_s=60,
        until_first_timeout=True,
    )
    calls: list[str] = []
    monkeypatch.setattr(backend, "_drop", lambda exc, where, note="": calls.append(f"drop{note}"))

    def timing_out(request):
        calls.append("exchange")
        raise ChannelError("timeout", "no answer in time")  # wall-clock: retried in a final grade

    monkeypatch.setattr(backend, "_exchange", timing_out)
    backend.begin_test("t::a", "a")
    with pytest.raises(remote.errors.StudentTimeout, match="ran past its time limit"):
        backend.call("mod", "f", (), {})
    assert calls == ["exchange", "drop"]  # not retried
    backend.begin_test("t::b", "b")  # another exercise: not run at all
    with pytest.raises(
        remote.errors.StudentTimeout, match="graded again: an earlier test timed out"
    ):
        backend.call("mod", "g", (), {})
    assert calls == ["exchange", "drop"]


def test_a_file_signature_changes_with_any_write_and_is_none_when_gone(tmp_path):
    """The memos of the proof file and of the grader's files (grader.safefs.signature) must see every
    change, a same-size rewrite and a rename over the file included."""
    from grader import safefs

    path = tmp_path / "proof.json"
    assert safefs.signature(path) is None
    path.write_text("aaaa")
    first = safefs.signature(path)
    os.utime(path, ns=(1, 1))  # an old mtime, same size: ctime still moves
    path.write_text("bbbb")
    os.utime(path, ns=(1, 1))
    second = safefs.signature(path)
    other = tmp_path / "new.json"
    other.write_text("bbbb")
    os.utime(other, ns=(1, 1))
    other.replace(path)  # same size, same times: another inode
    third = safefs.signature(path)
    assert len({first, second, third}) == 3 and all(s is not None for s in (first, second, third))
