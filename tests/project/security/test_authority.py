"""Student code never holds the grader's authority (the trust issue's first part), checked piece by piece.

The hostile class (test_hostile_class*.py) grades the attacks end to end under every level this machine offers;
here: the isolation record comes from /proc and a mismatch is a grader fault; the uid drop leaves no capability;
the private library holds only the sandbox side; a non-root grader refuses `process` and grades `none` only when
asked by name; a zygote serves only its own privilege class and its clients check they reached it; where only
file permissions guard the secrets, grading is refused until they do, and the files a sandbox left are removed.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from grader import canary
from grader.course import manifest
from grader.grade import grade
from grader.sandbox import attest, choice, privlib, shared_zygote, zygote_client
from grader.sandbox.isolation import LaunchSpec
from tests.project.support import readable
from tests.project.support.common import ROOT, solutions_copy

pytestmark = pytest.mark.cost(60)
as_root = pytest.mark.skipif(
    os.name != "posix" or os.geteuid() != 0, reason="the uid drop is root's (CI runs as root)"
)
SOFTMAX_ONLY = {"exercises": ["softmax"], "seed": 3}


# -- attestation ----------------------------------------------------------------------------------------
def _holder(argv: list[str]) -> tuple[subprocess.Popen[bytes], int]:
    """A process holding the read end of a fresh pipe as its stdin; returns it and our write end."""
    read, write = os.pipe()
    proc = subprocess.Popen(argv, stdin=read, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(read)
    return proc, write


@as_root
def test_attestation_reads_the_kernel_not_the_request():
    """A process that kept root fails an expectation of a leased uid; one that dropped (setpriv) passes it."""
    kept, pipe = _holder(["sleep", "30"])
    dropped, pipe2 = _holder(
        [
            "setpriv",
            "--reuid=61234",
            "--regid=61234",
            "--clear-groups",
            "--no-new-privs",
            "sleep",
            "30",
        ]
    )
    wanted = attest.Expected(uid=61234, seccomp=False, no_new_privs=True, namespaces=())
    try:
        time.sleep(
            0
        )  # both exist once Popen returns: the pipe's read end is held from the first instruction
        with pytest.raises(attest.AttestationError, match="runs as uid 0/0/0/0"):
            attest.attest(kept.pid, pipe, wanted)
        _wait_for_uid(dropped.pid, 61234)
        seen = attest.attest(dropped.pid, pipe2, wanted)
        assert seen.record()["uid"] == 61234 and seen.record()["capabilities"] == "none"
        with pytest.raises(attest.AttestationError, match="seccomp mode is 0"):
            attest.attest(
                dropped.pid,
                pipe2,
                attest.Expected(61234, seccomp=True, no_new_privs=True, namespaces=()),
            )
        with pytest.raises(attest.AttestationError, match="shares the grader's mnt"):
            attest.attest(
                dropped.pid, pipe2, attest.Expected(61234, False, True, namespaces=("mnt",))
            )
    finally:
        for proc in (kept, dropped):
            proc.kill()
            proc.wait()
        os.close(pipe)
        os.close(pipe2)


def _wait_for_uid(pid: int, uid: int) -> None:
    """setpriv drops the uid, then its capabilities, then execs `sleep`: wait for the exec (the thing
    itself, not a time; between the uid and the exec it still held capabilities once, under load)."""
    proc = Path(f"/proc/{pid}")
    while (
        f"Uid:\t{uid}\t" not in (proc / "status").read_text()
        or (proc / "comm").read_text().strip() != "sleep"
    ):
        time.sleep(0.01)


def test_attestation_finds_no_worker_when_nobody_holds_the_pipe():
    proc, pipe = _holder(["sleep", "30"])
    other_read, other_write = os.pipe()
    try:
        with pytest.raises(
            attest.AttestationError, match="no process of the sandbox holds the request pipe"
        ):
            attest.attest(proc.pid, other_write, attest.Expected(os.getuid(), False, False, ()))
    finally:
        proc.kill()
        proc.wait()
        for fd in (pipe, other_read, other_write):
            os.close(fd)


@as_root
@pytest.mark.parametrize("level", ["namespace", "process", "none"])
def test_the_scorecard_says_what_proc_showed(tmp_path, level):
    if level not in choice.available():
        pytest.skip(f"{level} is not available here")
    card = grade(solutions_copy(tmp_path / "sub"), isolation=level, **SOFTMAX_ONLY)
    record = card["isolation"]
    assert card["status"] == "graded" and card["score"] == card["max_score"] > 0, card["error"]
    assert (
        record["attested"] is True and record["uid"] >= 60000 and record["capabilities"] == "none"
    )
    assert record["no_new_privs"] is (level != "none") and record["seccomp"] is (level != "none")
    assert set(record["namespaces"]) == (
        {"mnt", "net", "pid", "ipc", "uts"} if level == "namespace" else set()
    )
    assert record["file_view"] == {"namespace": "namespace", "process": "landlock", "none": "none"}[
        level
    ] or (level == "process" and record["file_view"] == "permissions")


@as_root
def test_a_sandbox_that_is_not_what_was_promised_is_a_grader_fault_never_a_grade(
    tmp_path, monkeypatch
):
    """The attestation, not the request, decides: a launch whose workers do not match (here: a promise of a uid they
    do not run as, the mark a hijacked zygote or a skipped drop would leave) ends in an error card of kind grader."""
    real = LaunchSpec.expected
    monkeypatch.setattr(
        LaunchSpec,
        "expected",
        lambda self: attest.Expected(
            uid=59999,
            seccomp=real(self).seccomp,
            no_new_privs=real(self).no_new_privs,
            namespaces=real(self).namespaces,
        ),
    )
    card = grade(solutions_copy(tmp_path / "sub"), isolation="namespace", **SOFTMAX_ONLY)
    assert card["status"] == "error" and card["error"]["kind"] == "grader" and card["score"] == 0
    assert (
        "sandbox attestation failed" in card["error"]["message"]
        and "not 59999" in card["error"]["message"]
    )
    assert card["isolation"]["attested"] is False


# -- the uid drop, seen from inside ----------------------------------------------------------------------
PROBE = """import torch
def _status():
    fields = dict(line.split(":", 1) for line in open("/proc/self/status"))
    keep = ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp")
    raise RuntimeError("STATUS " + " ".join(f"{k}={fields[k].split()}" for k in keep))
def softmax_naive(x, dim=-1):
    _status()
def softmax_stable(x, dim=-1):
    _status()
"""


@as_root
@pytest.mark.parametrize("level", ["process", "none"])
def test_student_code_under_root_runs_unprivileged_at_every_level(tmp_path, level):
    """``process`` and ``none`` as root: a leased uid, no groups, no capability in any set (the bounding set too)."""
    sub = solutions_copy(tmp_path / "sub")
    (sub / "softmax.py").write_text(PROBE)
    card = grade(sub, isolation=level, **SOFTMAX_ONLY)
    text = "\n".join(t["message"] for e in card["exercises"] for t in e["tests"])
    uid = str(card["isolation"]["uid"])
    assert f"Uid=['{uid}', '{uid}', '{uid}', '{uid}']" in text and "Groups=[]" in text, text[:600]
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert f"{cap}=['0000000000000000']" in text, (cap, text[:600])
    assert int(uid) >= 60000


# -- the private library ---------------------------------------------------------------------------------
def test_the_private_library_holds_only_the_sandbox_side():
    lib = privlib.ensure()
    names = {p.relative_to(lib).as_posix() for p in lib.rglob("*.py")}
    tops = {n.split("/")[1] for n in names if n.count("/") > 1}
    assert tops == {"inside", "protocol", "sandbox"}
    assert {n for n in names if n.startswith("grader/sandbox/")} == {
        f"grader/sandbox/{m}" for m in privlib.LAUNCH_MODULES
    }
    assert not any("solutions" in n or "hidden" in n or "scoring" in n for n in names)
    for path in [lib, *lib.rglob("*")]:  # others read it; only its owner writes
        assert not path.stat().st_mode & 0o022 and path.stat().st_uid == os.geteuid(), path
    assert privlib.ensure() == lib  # named after its content: the same copy again


# -- a non-root grader --------------------------------------------------------------------------------------
@as_root
def test_a_non_root_grader_refuses_process_and_grades_none_only_when_asked(tmp_path):
    """As a normal user without bubblewrap, `auto` would be `process`: student code as the instructor. Refused,
    saying what to do; `--isolation none` grades, and the card says unsandboxed, as that user."""
    with readable.venv() as python:
        if python is None:
            pytest.skip("no interpreter another uid can run")
        home = Path(tempfile.mkdtemp(prefix="nonroot-"))
        try:
            home.chmod(0o755)
            sub = solutions_copy(home / "sub")
            shutil.chown(home, 65534, 65534)
            env = {
                "PATH": "/usr/bin:/bin",
                "HOME": str(home),
                "GRADER_CACHE_DIR": str(home / "cache"),
            }
            run = lambda *a: subprocess.run(  # noqa: E731
                [
                    "setpriv",
                    "--reuid=65534",
                    "--regid=65534",
                    "--clear-groups",
                    str(python),
                    "-I",
                    "-m",
                    "grader",
                    "grade",
                    str(sub),
                    "--seed",
                    "3",
                    "--no-canary",
                    *a,
                ],
                capture_output=True,
                text=True,
                env=env,
                cwd=str(home),
                timeout=900,
            )
            refused = run("--out", str(home / "refused.json"))
            assert refused.returncode == 2 and "refusing to grade" in refused.stderr, (
                refused.stderr[-2000:]
            )
            assert "install bubblewrap" in refused.stderr and "--isolation none" in refused.stderr
            assert not (home / "refused.json").exists()
            done = run("--isolation", "none", "--out", str(home / "card.json"))
            assert done.returncode == 0, done.stderr[-2000:]
            record = json.loads((home / "card.json").read_text())["isolation"]
            assert (
                record["backend"] == "none"
                and record["file_view"] == "none"
                and record["uid"] == 65534
            )
            assert record["attested"] is True and record["seccomp"] is False
        finally:
            shutil.rmtree(home, ignore_errors=True)


# -- the zygote: its own privilege class, and a broker its clients authenticate ---------------------------------
@as_root
def test_a_root_zygote_forks_nothing_that_would_keep_root(tmp_path):
    """A launch config that does not drop (uid 0, or no drop asked) is refused: no worker, the caller starts cold."""
    zygote = zygote_client.Zygote()
    try:
        assert zygote.wait_ready()
        box = tmp_path / "box"
        box.mkdir()
        config = LaunchSpec("process", slot=44).config(box, 3, 4, "")
        for bad in ({**config, "drop_uid": False}, {**config, "uid": 0}):
            fds = [os.pipe() for _ in range(5)]
            assert zygote.launch(bad, [w for _r, w in fds])
            for _r, w in fds:
                os.close(w)
            status = fds[4][0]
            assert os.read(status, 64) == b"", (
                "the zygote forked a worker for a config that keeps root"
            )
            for r, _w in fds:
                os.close(r)
    finally:
        zygote.close()


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch):
    folder = Path(tempfile.mkdtemp(prefix="gz-"))  # short: a socket path holds about 100 bytes
    monkeypatch.setenv("GRADER_CACHE_DIR", str(folder))
    monkeypatch.setenv(shared_zygote.ENV, "30")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_a_client_refuses_a_socket_that_is_not_its_zygote(cache):
    """Anything listening at the zygote's name that is not the process its pid file names (here: this test itself,
    with no pid file, then with another's) is not used, and is removed so that a real zygote can start."""
    path = shared_zygote.socket_path()
    assert path is not None
    for pid_file in (None, f"{os.getppid()} 1\n"):
        impostor = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        impostor.bind(str(path))
        impostor.listen(4)
        if pid_file:
            Path(f"{path}.pid").write_text(pid_file)
        try:
            assert shared_zygote.connect() is None
            assert not path.exists() and not Path(f"{path}.pid").exists()
        finally:
            impostor.close()
            path.unlink(missing_ok=True)


def test_the_long_lived_zygote_s_socket_path_is_in_no_argv(cache):
    assert shared_zygote.start()
    path = shared_zygote.socket_path()
    assert path is not None
    deadline = time.monotonic() + 120
    while not path.exists():
        assert time.monotonic() < deadline, "the zygote never published its socket"
        time.sleep(0.05)
    zygote = shared_zygote.connect()
    assert zygote is not None, "a real zygote must pass the client's check"
    zygote.close()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            assert str(cache).encode() not in cmdline.read_bytes(), cmdline
        except OSError:
            continue


# -- the canary's key follows the launch actually used --------------------------------------------------------
def test_the_canary_key_changes_with_the_launch_configuration(monkeypatch):
    """A proof made under one launch (file view, uid drop) is never reused for another, which may not even start."""
    assignment = manifest.load(None, None)

    def key():
        return canary.cache_key(
            assignment, backend="process", exercises=None, per_test_time_limit=None
        )

    keys = [key()]
    choice.landlock_abi.cache_clear()
    monkeypatch.setenv(choice.LANDLOCK_ENV, "off")
    try:
        keys.append(key())
        monkeypatch.setattr(LaunchSpec, "drops_uid", property(lambda self: False))
        keys.append(key())
    finally:
        choice.landlock_abi.cache_clear()
    assert len(set(keys)) == 3, keys


# -- without Landlock: the secrets' permissions must hold, and what a sandbox wrote goes ---------------------
LITTERS = """import os, shutil
for _folder in ("/tmp", "/dev/shm", "/var/tmp"):
    shutil.copy("/dev/null", os.path.join(_folder, f"attention-litter-{os.getuid()}"))  # raises unless it can
"""  # then the reference softmax


@pytest.fixture
def open_folder():
    """A folder other users may enter (pytest's own are closed: the course's own permissions must decide)."""
    folder = Path(tempfile.mkdtemp(prefix="course-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@as_root
def test_process_without_landlock_refuses_readable_secrets_then_grades_and_cleans_up(
    tmp_path, open_folder
):
    course = open_folder / "course"
    course.mkdir()
    shutil.copy(ROOT / "assignments.json", course)
    for folder in ("solutions", "exercises", "tests/hidden"):
        shutil.copytree(ROOT / folder, course / folder)
    sub = solutions_copy(tmp_path / "sub")
    reference = (sub / "softmax.py").read_text().replace("from __future__ import annotations", "")
    (sub / "softmax.py").write_text(LITTERS + reference)
    env = {**os.environ, choice.LANDLOCK_ENV: "off", "GRADER_CACHE_DIR": str(tmp_path / "cache")}
    args = [
        str(Path(sys.executable).parent / "grader"),
        "grade",
        str(sub),
        "--isolation",
        "process",
        "--manifest",
        str(course / "assignments.json"),
        "--seed",
        "3",
        "--no-canary",
    ]
    refused = subprocess.run(
        [*args, "--out", str(tmp_path / "no.json")], env=env, capture_output=True, text=True
    )
    assert (
        refused.returncode == 2
        and "could read" in refused.stderr
        and "chmod -R go-rwx" in refused.stderr
    ), refused.stderr[-1500:]
    for folder in ("solutions", "tests/hidden"):
        subprocess.run(["chmod", "-R", "go-rwx", str(course / folder)], check=True)
    done = subprocess.run(
        [*args, "--out", str(tmp_path / "card.json")], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    card = json.loads((tmp_path / "card.json").read_text())
    softmax = [t["outcome"] for e in card["exercises"] if e["id"] == "softmax" for t in e["tests"]]
    assert card["isolation"]["file_view"] == "permissions" and set(softmax) == {"passed"}, (
        softmax
    )  # it did write
    uid = card["isolation"]["uid"]
    assert not [
        p for f in ("/tmp", "/dev/shm", "/var/tmp") for p in Path(f).glob(f"attention-litter-{uid}")
    ]
