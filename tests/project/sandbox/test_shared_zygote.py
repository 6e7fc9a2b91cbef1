"""This user's long-lived zygote: later ``grader grade`` runs fork their workers from it; only this user reaches it;
its name follows what it runs; it ends when idle; a client's workers die with the client."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.sandbox import shared_zygote, uids
from tests.project.support.common import needs_namespace, solutions_copy

pytestmark = pytest.mark.cost(45)  # seconds on 2 cores: started early (tests/project/conftest.py)

GRADER = str(Path(sys.executable).parent / "grader")


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A cache folder of this test's own (its zygote), with a short idle time, at a short path: a socket's name
    holds about 100 bytes, and pytest's own temporary folders are longer than a user's ~/.cache."""
    folder = Path(tempfile.mkdtemp(prefix="gz-"))
    monkeypatch.setenv("GRADER_CACHE_DIR", str(folder))
    monkeypatch.setenv(shared_zygote.ENV, "30")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)  # a zygote whose socket is gone ends at its next look


def _wait_for_socket(timeout: float = 60.0) -> Path:
    path = shared_zygote.socket_path()
    assert path is not None
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, "the zygote never published its socket"
        time.sleep(0.1)
    return path


def _grade(sub: Path, out: Path, **env: str) -> dict:
    done = subprocess.run(
        [
            GRADER,
            "grade",
            str(sub),
            "--out",
            str(out),
            "--isolation",
            "namespace",
            "--seed",
            "3",
            "--no-canary",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    card: dict = json.loads(out.read_text())
    return card


@needs_namespace
def test_the_first_run_leaves_a_zygote_and_the_next_run_forks_from_it(cache, tmp_path):
    sub = solutions_copy(tmp_path / "sub")
    first = _grade(sub, tmp_path / "1.json")
    assert first["isolation"]["worker_forks"] == 0 and first["score"] == first["max_score"]
    path = _wait_for_socket()
    assert path.parent.stat().st_mode & 0o777 == 0o700 and path.stat().st_mode & 0o777 == 0o600
    second = _grade(sub, tmp_path / "2.json")
    assert second["isolation"]["worker_forks"] == second["isolation"]["worker_starts"] == 1
    assert second["score"] == first["score"] and second["seed"] == first["seed"] == 3
    tests = lambda card: {t["id"]: t["outcome"] for e in card["exercises"] for t in e["tests"]}  # noqa: E731
    assert tests(second) == tests(first)  # the same seed, the same outcomes, forked or not


@needs_namespace
def test_a_first_run_that_must_prove_the_canary_starts_the_zygote_first_and_everything_forks(
    cache, tmp_path
):
    """No zygote and no canary proof yet (a machine's first run): the zygote is started at once, the canary's
    references and stubs and then the student are graded by workers forked from it."""
    sub = solutions_copy(tmp_path / "sub")
    done = subprocess.run(
        [GRADER, "grade", str(sub), "--out", str(tmp_path / "1.json"), "--isolation", "namespace"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    card = json.loads((tmp_path / "1.json").read_text())
    assert card["canary"]["cached"] is False and card["canary"]["solutions"] == card["max_score"]
    assert card["isolation"]["worker_forks"] == card["isolation"]["worker_starts"] == 1
    assert len(_zygote_pids(_wait_for_socket(timeout=1.0))) == 1


@needs_namespace
def test_keep_warm_zero_starts_no_zygote(cache, tmp_path, monkeypatch):
    monkeypatch.setenv(shared_zygote.ENV, "0")
    sub = solutions_copy(tmp_path / "sub")
    (sub / "masks.py").unlink()
    card = _grade(sub, tmp_path / "1.json")
    time.sleep(2.0)
    assert card["isolation"]["worker_forks"] == 0 and shared_zygote.socket_path() is None
    assert not (cache / "attention-grader" / "zygotes").exists() or not any(
        (cache / "attention-grader" / "zygotes").iterdir()
    )


def test_no_socket_in_a_folder_others_may_enter(cache):
    folder = cache / "attention-grader" / "zygotes"
    folder.mkdir(parents=True, mode=0o700)
    assert shared_zygote.socket_path() is not None
    folder.chmod(0o770)
    assert shared_zygote.socket_path() is None
    folder.chmod(0o700)
    os.chown(folder, 65534, 65534)  # someone else's folder (this test runs as root, as CI does)
    assert shared_zygote.socket_path() is None


def test_the_name_follows_what_the_zygote_runs(cache, monkeypatch):
    before = shared_zygote.digest()
    monkeypatch.setattr(shared_zygote, "site_dirs", lambda: ["/elsewhere/site-packages"])
    assert shared_zygote.digest() != before


@needs_namespace
def test_it_serves_only_its_own_user_and_ends_when_idle(cache, monkeypatch):
    monkeypatch.setenv(shared_zygote.ENV, "3")
    assert shared_zygote.start()
    path = _wait_for_socket()
    mine = shared_zygote.connect()
    assert mine is not None and mine.alive
    mine.close()
    # another uid, handed a descriptor of the socket's folder's file: the zygote hangs up on it at once
    code = (
        "import os, socket, sys\nos.setresuid(65534, 65534, 65534)\ns = socket.socket(socket.AF_UNIX, "
        "socket.SOCK_SEQPACKET)\ntry:\n    s.connect(sys.argv[1])\nexcept OSError as e:\n    print('refused', e.errno)"
        "\n    sys.exit(0)\ns.settimeout(5)\nprint('closed' if s.recv(16) == b'' else 'served')\n"
    )
    for folder in (
        cache,
        path.parent,
    ):  # let the other uid reach the socket's name: the peer check must still refuse
        os.chmod(folder, 0o711)
    os.chmod(path, 0o666)
    other = subprocess.run(
        [sys.executable, "-I", "-c", code, str(path)], capture_output=True, text=True, timeout=30
    )
    assert other.stdout.strip() == "closed", other.stdout + other.stderr
    deadline = time.monotonic() + 30
    while path.exists():  # idle for 3 s: it removes its socket and ends
        assert time.monotonic() < deadline, "the idle zygote did not end"
        time.sleep(0.2)


@needs_namespace
def test_a_killed_grader_leaves_no_worker_behind(cache, tmp_path):
    """SIGKILL reaches no finally block: the zygote sees the connection close and kills that client's workers."""
    assert shared_zygote.start()
    _wait_for_socket()
    sub = solutions_copy(tmp_path / "sub")
    (sub / "softmax.py").write_text(
        "import time\n\n\ndef softmax_naive(x, dim=-1):\n    time.sleep(600)\n\n\n"
        "def softmax_stable(x, dim=-1):\n    time.sleep(600)\n"
    )
    proc = subprocess.Popen(
        [GRADER, "grade", str(sub), "--out", str(tmp_path / "c.json"), "--no-canary"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while not _sleeping_workers(sub):
        assert time.monotonic() < deadline and proc.poll() is None, (
            "no worker ever ran the submission"
        )
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 15
    while _sleeping_workers(sub):
        assert time.monotonic() < deadline, "the killed grader's worker lives on"
        time.sleep(0.2)


def _sleeping_workers(sub: Path) -> list[int]:
    """Pids of sandboxed workers (a leased uid, not root) in the middle of the planted ``time.sleep``."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            wchan = Path(f"/proc/{entry}/wchan").read_text()
            uid = int(Path(f"/proc/{entry}/status").read_text().split("Uid:")[1].split()[0])
        except (OSError, IndexError, ValueError):
            continue
        if uid >= uids.FIRST and (b"worker.py" in cmd or b"zygote.py" in cmd) and "sleep" in wchan:
            found.append(int(entry))
    return found


@needs_namespace
def test_once_start_returns_a_client_sees_the_zygote_until_it_serves(cache):
    """No moment with neither name (a loaded machine's batch slot then started a zygote of its own):
    `start()` returns once the staging name is bound, and a waiting client connects after the
    rename however late its last look."""
    assert shared_zygote.start()
    path = shared_zygote.socket_path()
    assert path is not None and (shared_zygote.warming() or path.exists())
    zygote = shared_zygote.connect_when_warm(120.0)
    assert zygote is not None and zygote.alive
    zygote.close()


def test_start_refuses_quietly_where_sharing_is_off(cache, monkeypatch):
    monkeypatch.setenv(shared_zygote.ENV, "0")
    assert shared_zygote.start() is False and shared_zygote.connect() is None


def _batch(klass: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            GRADER,
            "batch",
            str(klass),
            "--out",
            str(out),
            "-j",
            "2",
            "--isolation",
            "namespace",
            "--exercise",
            "softmax",
            "--exercise",
            "masks",
            "--seed",
            "5",
            "--quiet",
            "--no-canary",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )


@needs_namespace
def test_a_batchs_slots_share_one_zygote_and_the_next_batch_forks_from_it_too(cache, tmp_path):
    """`grader batch` starts this user's zygote beside its slots: both slots fork every worker from it (not from a
    zygote each), it outlives the batch, and the next batch forks from that same process."""
    klass = tmp_path / "class"
    for name in ("ann", "ben", "cal"):
        solutions_copy(klass / name)
    (klass / "cal" / "masks.py").unlink()
    runs = []
    for run in ("1", "2"):
        done = _batch(klass, tmp_path / f"out{run}")
        assert done.returncode == 0, done.stderr[-2000:]
        logs = [(tmp_path / f"out{run}" / "logs" / f"slot-{n}.log").read_text() for n in (0, 1)]
        assert all(
            f"slot {n}: workers forked from this user's zygote" in log for n, log in enumerate(logs)
        ), logs
        cards = {
            p.stem: json.loads(p.read_text())
            for p in (tmp_path / f"out{run}" / "scorecards").glob("*.json")
        }
        assert {k: c["score"] for k, c in cards.items()} == {"ann": 14, "ben": 14, "cal": 6}
        assert all(
            c["isolation"]["worker_forks"] == c["isolation"]["worker_starts"] >= 1
            for c in cards.values()
        )
        path = _wait_for_socket(timeout=1.0)  # still there after the batch
        runs.append((path.stat().st_ino, _zygote_pids(path)))
    assert runs[0] == runs[1] and len(runs[0][1]) == 1  # one zygote, the same one for both batches


def _zygote_pids(path: Path) -> list[int]:
    """The processes holding the socket bound at ``path`` (its path is in no argv: found by the socket's inode;
    the kernel lists it under the name it was bound at, ``<path>.<pid>``, before the rename that publishes it)."""
    inodes = {
        line.split()[6]
        for line in Path("/proc/net/unix").read_text().splitlines()[1:]
        if line.split()[-1].startswith(f"{path}.") or line.split()[-1] == str(path)
    }
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and any(
                os.readlink(fd).removeprefix("socket:[").rstrip("]") in inodes
                for fd in (proc / "fd").iterdir()
            ):
                found.append(int(proc.name))
        except OSError:
            continue
    return found
