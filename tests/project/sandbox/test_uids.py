"""Machine-wide uid leases: no two live sandboxes share a uid, a dead holder's uid comes back clean,
and a submission that parks processes under its uid cannot starve another run's honest student."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator

import pytest

from grader import schema
from grader.grade import grade
from grader.sandbox import choice, isolation, uids
from tests.project.support.common import ROOT, running, solutions_copy

PR_SET_CHILD_SUBREAPER = 36
root_only = pytest.mark.skipif(
    os.name != "posix" or os.geteuid() != 0, reason="parking processes under another uid needs root"
)

# a holder process: lease a uid (private folder and range, or the real machine-wide lease), park N processes
# under it, say {"uid", "parked"} and wait to be killed
HOLDER = textwrap.dedent("""
    import json, os, signal, sys, time
    from pathlib import Path
    from grader.sandbox import uids
    where, first, count, park = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    lease = uids.lease_for_slot(0) if where == "-" else uids.acquire(Path(where), first, count)
    parked = []
    for _ in range(park):
        pid = os.fork()
        if pid == 0:
            os.closerange(3, 1024)  # like a sandbox: no descriptor of the trusted side (the lease's lock) here
            os.setresgid(lease.uid, lease.uid, lease.uid)
            os.setresuid(lease.uid, lease.uid, lease.uid)
            signal.pause()
            os._exit(0)
        parked.append(pid)
    for pid in parked:  # wait until each child runs under the uid: it has closed the lease's lock by then
        while str(lease.uid) not in Path(f"/proc/{pid}/status").read_text().split("Uid:")[1].split("Gid:")[0].split():
            time.sleep(0.005)
    print(json.dumps({"uid": lease.uid, "parked": parked}), flush=True)
    time.sleep(600)
""")


def _holder(
    where: str, first: int = 0, count: int = 0, park: int = 0
) -> tuple[subprocess.Popen, dict]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, where, str(first), str(count), str(park)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        start_new_session=True,
    )
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())


@pytest.fixture
def holders() -> Iterator[list[subprocess.Popen]]:
    made: list[subprocess.Popen] = []
    yield made
    for proc in made:  # the holder and everything it parked (one process group)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


@contextlib.contextmanager
def _reaping(pids: list[int]) -> Iterator[None]:
    """Be the subreaper of our descendants and reap ``pids`` as they die (zombies still hold their uid)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    done = threading.Event()

    def reap() -> None:
        left = set(pids)
        while left and not done.is_set():
            for pid in list(left):
                try:
                    if os.waitpid(pid, os.WNOHANG)[0]:
                        left.discard(pid)
                except ChildProcessError:
                    pass  # not ours (yet): still the holder's child
            time.sleep(0.01)

    thread = threading.Thread(target=reap, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def test_a_uid_held_by_a_live_process_is_never_handed_out_again(tmp_path, holders):
    got = []
    for _ in range(4):
        proc, info = _holder(str(tmp_path), 61000, 20)
        holders.append(proc)
        got.append(info["uid"])
    mine = uids.acquire(tmp_path, 61000, 20).uid
    assert len(set([*got, mine])) == 5, got


def test_concurrent_holders_get_distinct_uids_at_the_same_moment(tmp_path, holders):
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(tmp_path), "61050", "20", "0"],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            start_new_session=True,
        )
        for _ in range(6)
    ]
    holders.extend(procs)
    got = [json.loads(p.stdout.readline())["uid"] for p in procs if p.stdout is not None]
    assert len(got) == 6 and len(set(got)) == 6, got


@root_only
def test_a_crashed_holders_uid_is_reusable_and_its_leftovers_are_killed(tmp_path, holders):
    proc, info = _holder(str(tmp_path), 61100, 1, park=2)
    holders.append(proc)
    assert info["uid"] == 61100 and all(running(p) for p in info["parked"])
    with pytest.raises(uids.UidLeaseError):
        uids.acquire(tmp_path, 61100, 1)  # held: nobody else gets it
    with _reaping(info["parked"]):  # orphans come to us, not to an init that may reap them late
        os.kill(proc.pid, signal.SIGKILL)  # the holder dies; what it parked survives it
        proc.wait()
        assert all(running(p) for p in info["parked"])
        lease = uids.acquire(tmp_path, 61100, 1)
    assert lease.uid == 61100
    assert not any(running(p) for p in info["parked"]), (
        "a leftover of the dead holder still runs under the uid"
    )
    lease.release()
    assert uids.acquire(tmp_path, 61100, 1).uid == 61100  # released: free again


@root_only
def test_a_live_holders_processes_are_left_alone(tmp_path, holders):
    proc, info = _holder(str(tmp_path), 61200, 2, park=1)
    holders.append(proc)
    lease = uids.acquire(tmp_path, 61200, 2)
    assert lease.uid == 61201 and running(info["parked"][0])


def test_a_slot_keeps_its_uid_while_held_and_slots_never_share():
    a, b = isolation.LaunchSpec("namespace", slot=40), isolation.LaunchSpec("namespace", slot=41)
    again = isolation.LaunchSpec("namespace", slot=40)
    assert a.uid == again.uid != b.uid
    assert a == again  # the lease takes no part in equality (a warm worker's spec must still match)
    # every level that runs as root leases a uid: none keeps ours (on a non-root machine they all do)
    dropping = os.getuid() == 0
    for level in ("process", "none"):
        assert (isolation.LaunchSpec(level, slot=42).uid != os.getuid()) == dropping


def test_the_lease_folder_refuses_one_others_can_write(tmp_path, monkeypatch):
    bad = tmp_path / "open"
    bad.mkdir(mode=0o777)
    bad.chmod(0o777)
    monkeypatch.setattr(uids, "LEASE_DIRS", (bad,))
    with pytest.raises(uids.UidLeaseError):
        uids.lease_dir()


@root_only
@pytest.mark.skipif(
    "namespace" not in choice.available(), reason="needs the namespace sandbox (root on Linux)"
)
def test_processes_parked_under_another_runs_uid_do_not_touch_an_honest_grade(tmp_path, holders):
    """The other run's submission parks more processes than RLIMIT_NPROC under its (leased) uid."""
    proc, info = _holder("-", park=70)
    holders.append(proc)
    card = grade(
        solutions_copy(tmp_path / "sub"),
        isolation="namespace",
        seed=5,
        exercises=["softmax", "masks"],
        per_test_time_limit=10,
    )
    schema.validate("scorecard", card)
    assert card["isolation"]["uid"] != info["uid"]
    assert card["score"] == card["max_score"] == 14, card["incidents"]
    assert all(
        running(p) for p in info["parked"]
    )  # a live lease's processes are never ours to kill
