"""Grading a class on a Dask cluster end to end (`grader batch --dask`): real `grader` processes, a real
LocalCluster (`local:2`, and one of this test's own behind TLS), real worker kills; no mocks.

The class is small and only the softmax exercise is graded. One student ("slow") sleeps 3 s when its module
is imported, so that a signal or a killed worker lands while it is being graded.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from grader import schema
from grader.batch import hostcheck
from grader.batch.results import Options
from grader.cli.main import main
from grader.cluster import messages as wire
from grader.course import manifest
from grader.exports.summary import summarize
from grader.intake import classfolder as discover
from grader.sandbox import isolation
from tests.project.support.common import CORPUS, ROOT, needs_namespace, running

pytestmark = pytest.mark.cost(73)  # seconds on 2 cores: started early (tests/project/conftest.py)

distributed = pytest.importorskip(
    "distributed", reason="the [distributed] extra (in .[dev]) is not installed"
)

FAST = ["--exercise", "softmax", "--per-test-time-limit", "8", "--seed", "5", "--quiet"]
CORRECT = ("alice", "bob")
BUGGY = ("stable_without_max", "naive_sums_dim0")
KEYS = {*CORRECT, *BUGGY, "slow", "broken"}
TIMING = {
    "generated",
    "wall_s",
    "submissions_per_minute",
    "slots",
    "slowest",
    "timing",
    "last_graded_run",
}


def _make_class(root: Path) -> Path:
    for name in CORRECT:
        (root / name).mkdir(parents=True)
        shutil.copy(ROOT / "solutions" / "softmax.py", root / name / "softmax.py")
    for name in BUGGY:
        (root / name).mkdir()
        shutil.copy(CORPUS / "buggy" / "softmax" / f"{name}.py", root / name / "softmax.py")
    (root / "slow").mkdir()
    source = (ROOT / "solutions" / "softmax.py").read_text()
    (root / "slow" / "softmax.py").write_text(
        source + "\n\nimport time\n\ntime.sleep(3)  # a slow import: 3 s mid-grade\n"
    )
    (root / "broken.zip").write_bytes(
        b"PK\x03\x04 truncated"
    )  # an intake error, read by the coordinator
    return root


def _grader(
    *args: str, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "grader", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )


def _cards(out: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted((out / "scorecards").glob("*.json"))}


def _outcomes(card: dict) -> list:
    return [[(t["id"], t["outcome"]) for t in ex["tests"]] for ex in card["exercises"]]


def _tagged_processes(tag: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if f"GRADER_TEST_TAG={tag}".encode() in (proc / "environ").read_bytes():
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One single-machine run (-j 2); one `--dask local:2` run stopped by SIGTERM once two scorecards were
    written, then the same command again, which resumes."""
    base = tmp_path_factory.mktemp("dask")
    klass = _make_class(base / "class")
    single = _grader("batch", str(klass), "--out", str(base / "single"), "-j", "2", *FAST)
    assert single.returncode == 1, single.stderr  # "broken" is an intake error
    tag = uuid.uuid4().hex
    cmd = [
        sys.executable,
        "-m",
        "grader",
        "batch",
        str(klass),
        "--out",
        str(base / "dask"),
        "--dask",
        "local:2",
        *FAST,
    ]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=klass,
        env={**os.environ, "GRADER_TEST_TAG": tag},
    )
    deadline = time.monotonic() + 180
    while (
        time.monotonic() < deadline and len(list((base / "dask" / "scorecards").glob("*.json"))) < 2
    ):
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    interrupted = SimpleNamespace(
        returncode=proc.returncode, stderr=err, cards=_cards(base / "dask"), left=_wait_gone(tag)
    )
    resumed = _grader("batch", str(klass), "--out", str(base / "dask"), "--dask", "local:2", *FAST)
    return SimpleNamespace(base=base, klass=klass, interrupted=interrupted, resumed=resumed)


def _wait_gone(tag: str, seconds: float = 15) -> list[int]:
    """The processes of a run (its tag in their environment) still alive after ``seconds`` (slots take a moment)."""
    deadline = time.monotonic() + seconds
    while _tagged_processes(tag) and time.monotonic() < deadline:
        time.sleep(0.2)
    return _tagged_processes(tag)


@needs_namespace
@pytest.mark.slow
def test_sigterm_keeps_finished_scorecards_and_leaves_no_process(runs):
    stopped = runs.interrupted
    assert stopped.returncode == 130, stopped.stderr
    assert "interrupted" in stopped.stderr and "rerun the same command to resume" in stopped.stderr
    assert (
        2 <= len(stopped.cards) < len(KEYS) and "slow" not in stopped.cards
    )  # "slow" was mid-grade
    for card in stopped.cards.values():
        schema.validate("scorecard", card)
    assert [
        p.name for p in (runs.base / "dask" / "scorecards").iterdir() if p.name.startswith(".")
    ] == []
    assert stopped.left == []  # no worker, nanny, slot or sandbox of that run is left


@needs_namespace
@pytest.mark.slow
def test_the_rerun_resumes_and_equals_the_single_machine_run(runs):
    done = runs.resumed
    assert done.returncode == 1, done.stderr  # as the single run: one intake error, and it says so
    kept = len(
        set(runs.interrupted.cards) - {"broken"}
    )  # an intake error is read again: never "unchanged"
    assert "intake error" in done.stderr and done.stderr.count("unchanged, kept") == kept
    single, out = runs.base / "single", runs.base / "dask"
    assert (out / "gradebook.csv").read_text() == (single / "gradebook.csv").read_text()
    a, b = _cards(single), _cards(out)
    assert set(a) == set(b) == KEYS
    for key in KEYS:
        assert (b[key]["status"], b[key]["score"], b[key]["seed"]) == (
            a[key]["status"],
            a[key]["score"],
            a[key]["seed"],
        )
        assert _outcomes(b[key]) == _outcomes(a[key])
        assert (
            b[key]["submission"]["path"] == a[key]["submission"]["path"]
        )  # the coordinator's, not a worker's copy
        assert b[key]["submission"]["sha256"] == a[key]["submission"]["sha256"]
    assert (
        b["slow"]["isolation"]["backend"] == "namespace" and b["slow"]["canary"]["solutions"] == 6
    )
    s1, s2 = (json.loads((d / "summary.json").read_text()) for d in (single, out))
    schema.validate("summary", s2)
    s1["canary"].pop("cached"), s2["canary"].pop("cached")
    assert (s1["counts"].pop("skipped"), s2["counts"].pop("skipped")) == (
        0,
        kept,
    )  # the rest is the same class
    assert {k: v for k, v in s2.items() if k not in TIMING} == {
        k: v for k, v in s1.items() if k not in TIMING
    }
    assert s2["timing"]["dask_workers"] == 2
    assert s2["cuda"] == {"graded": 0, "submissions": []}  # no GPU here
    rows = {r["student"]: r for r in csv.DictReader((out / "gradebook.csv").open())}
    assert {k for k, r in rows.items() if r["status"] == "graded" and float(r["total"]) == 6} == {
        *CORRECT,
        "slow",
    }
    log = [
        line.split() for line in (out / "logs" / "dask.log").read_text().splitlines()
    ]  # both runs
    assert sorted(line[1] for line in log) == sorted(
        KEYS - {"broken"}
    )  # nobody graded twice, nobody lost
    assert all(
        line[3].startswith("worker=tls://127.0.0.1:") for line in log
    )  # local:N: TLS, on loopback only


@needs_namespace
@pytest.mark.slow
def test_a_rerun_with_nothing_to_grade_starts_no_cluster(runs, tmp_path):
    out = Path(shutil.copytree(runs.base / "dask", tmp_path / "out"))
    done = _grader("batch", str(runs.klass), "--out", str(out), "--dask", "local:2", *FAST)
    assert done.returncode == 1 and done.stderr.count("unchanged, kept") == len(KEYS) - 1, (
        done.stderr
    )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["skipped"] == len(KEYS) - 1 and summary["canary"]["solutions"] == 6
    assert summary["timing"]["dask_workers"] == 0  # "broken" is read again, here: no cluster for it


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    """This test's own cluster, as an instructor would run one: TLS with a CA, 2 worker processes with nannies."""
    import dask
    from distributed import Client, LocalCluster, Security

    folder = Path(
        tempfile.mkdtemp(prefix="grader-test-tls-")
    )  # not under pytest's root-only folder:
    folder.chmod(0o755)  # an unprivileged worker reads them too
    temporary = Security.temporary()
    pems = {
        "ca": temporary.tls_ca_file,
        "cert": temporary.tls_client_cert,
        "key": temporary.tls_client_key,
    }
    files = {}
    for name, pem in pems.items():
        files[name] = folder / f"{name}.pem"
        files[name].write_text(pem)
        files[name].chmod(0o644)
    ca, cert, key = (str(files[n]) for n in ("ca", "cert", "key"))
    security = Security(
        require_encryption=True,
        tls_ca_file=ca,
        tls_client_cert=cert,
        tls_client_key=key,
        tls_scheduler_cert=cert,
        tls_scheduler_key=key,
        tls_worker_cert=cert,
        tls_worker_key=key,
    )
    with dask.config.set({"distributed.scheduler.worker-saturation": 1.0}):
        # the slot fault hook of the batch engine's own tests: a slot that is sent "doomed" dies on the spot
        cluster = LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            memory_limit=0,
            security=security,
            env={"GRADER_BATCH_SLOT_FAULT": "doomed"},
        )
    client = Client(cluster)
    flags = ["--dask-tls-ca", ca, "--dask-tls-cert", cert, "--dask-tls-key", key]
    yield SimpleNamespace(
        cluster=cluster,
        client=client,
        address=cluster.scheduler_address,
        flags=flags,
        files=files,
        folder=folder,
    )
    client.close()
    cluster.close()
    shutil.rmtree(folder, ignore_errors=True)


def _children(pid: int) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if (
                proc.name.isdigit()
                and int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid
            ):
                found.append(int(proc.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def _kill_when_grading(
    client, student: str, seconds: float, deadline: float
) -> tuple[str, list[str], list[int]]:
    """SIGKILL the Dask worker once it has been grading ``student`` for ``seconds``: its address, its tasks then,
    and its child processes (its grading slots)."""
    seen: dict[str, float] = {}
    while time.monotonic() < deadline:
        for address, keys in client.processing().items():
            for k in (str(k) for k in keys if str(k).endswith(f"-{student}")):
                seen.setdefault(f"{address} {k}", time.monotonic())
                if time.monotonic() - seen[f"{address} {k}"] >= seconds:
                    pid = client.run(os.getpid, workers=[address])[address]
                    slots = _children(pid)
                    os.kill(pid, signal.SIGKILL)
                    return address, [str(k) for k in keys], slots
        time.sleep(0.05)
    raise AssertionError(f"{student} was never seen being graded")


@needs_namespace
@pytest.mark.slow
def test_a_worker_killed_mid_grade_loses_nothing_and_duplicates_nothing(runs, tls, tmp_path):
    out = Path(shutil.copytree(runs.base / "dask", tmp_path / "out"))
    (out / "logs" / "dask.log").unlink()
    before = {k: c["timings"]["started"] for k, c in _cards(out).items()}
    cmd = [
        sys.executable,
        "-m",
        "grader",
        "batch",
        str(runs.klass),
        "--out",
        str(out),
        "--dask",
        tls.address,
        *tls.flags,
        "--force",
        *FAST,
    ]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        killed, lost, slots = _kill_when_grading(tls.client, "slow", 1.0, time.monotonic() + 180)
    finally:
        _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1 and "intake error" in err and "grader error" not in err, err
    cards = _cards(out)
    assert set(cards) == KEYS and all(
        cards[k]["timings"]["started"] != before[k] for k in KEYS
    )  # --force regraded
    single = _cards(runs.base / "single")
    assert {k: (c["status"], c["score"]) for k, c in cards.items()} == {
        k: (c["status"], c["score"]) for k, c in single.items()
    }
    log = [line.split() for line in (out / "logs" / "dask.log").read_text().splitlines()]
    assert sorted(line[1] for line in log) == sorted(
        KEYS - {"broken"}
    )  # one result per student, none twice
    graded_by = {line[1]: line[3].removeprefix("worker=") for line in log}
    assert lost and all(
        graded_by[k.rsplit("-", 1)[1]] != killed for k in lost
    )  # regraded elsewhere
    assert slots and not [pid for pid in slots if running(pid)]  # its grading slot stopped with it
    deadline = time.monotonic() + 60
    while len(tls.client.scheduler_info()["workers"]) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)  # the nanny restarts the killed worker: the next tests see 2 again


@needs_namespace
@pytest.mark.slow
def test_a_slot_that_dies_on_a_worker_is_a_grader_error_never_lost_points(tls, tmp_path):
    klass = tmp_path / "class"
    for name in ("doomed", "carol"):
        (klass / name).mkdir(parents=True)
        shutil.copy(ROOT / "solutions" / "softmax.py", klass / name / "softmax.py")
    done = _grader(
        "batch",
        str(klass),
        "--out",
        str(tmp_path / "out"),
        "--dask",
        tls.address,
        *tls.flags,
        *FAST,
    )
    assert done.returncode == 1 and "1 submission(s) ended in a grader error" in done.stderr, (
        done.stderr
    )
    cards = _cards(tmp_path / "out")
    doomed = cards["doomed"]
    assert (doomed["status"], doomed["error"]["kind"], doomed["score"]) == ("error", "grader", 0)
    assert "grading slot process on tls://127.0.0.1:" in doomed["error"]["message"]
    assert "ended (exit status 70)" in doomed["error"]["message"]
    assert (cards["carol"]["status"], cards["carol"]["score"]) == ("graded", 6)  # the batch went on


@needs_namespace
@pytest.mark.slow
def test_a_failed_task_is_a_grader_error_never_a_grade(runs, tls, tmp_path):
    """A task that failed for good (here a real one that raised) becomes a grader error card; so does any
    result that is not an acceptable scorecard for what was sent (forged, oversized, malformed)."""
    from grader.cluster.connect import Target
    from grader.cluster.grading import DaskGrading

    assignment = manifest.load()
    grading = DaskGrading(
        out=tmp_path,
        options=Options(exercises=["softmax"], seed=5),
        assignment=assignment,
        target=Target(None, 1),
    )
    entries = {e.key: e for e in discover.discover(runs.klass).entries}
    payload = wire.take(entries["alice"].path, modules={e.module for e in assignment.exercises})
    failed = tls.client.submit(int, "not a number", pure=False)
    with pytest.raises(ValueError):
        failed.result()
    card = grading.result(failed, entries["alice"], payload).card
    assert (card["status"], card["error"]["kind"], card["score"]) == ("error", "grader", 0)
    assert "ValueError" in card["error"]["message"] and "rerun" in card["error"]["message"]
    good = _cards(runs.base / "dask")["alice"]

    def reply(**changes) -> str:
        return json.dumps(
            {
                "key": "alice",
                "worker": "tls://w:1",
                "wall_s": 1.0,
                "warm": True,
                "card": good,
                "canary": good["canary"],
                **changes,
            }
        )

    accepted = grading.accept(reply(), entries["alice"], payload)
    assert (accepted.card["status"], accepted.card["score"]) == ("graded", 6)
    forged = [
        reply(
            card={**good, "submission": {**good["submission"], "sha256": "0" * 64}}
        ),  # another content's card
        reply(card={**good, "score": 60}),
        reply(key="bob"),
        reply(card={**good, "exercises": "all"}),
        reply(card={**good, "assignment": "attention-modern"}),
        reply() + " " * wire.MAX_RESULT_BYTES,
        reply().replace('"wall_s": 1.0', '"wall_s": NaN'),
        reply()[:-1] + ', "key": "alice"}',
        "{",
        b"{}",
        reply(fault="x", card=good),
    ]
    for text in forged:
        card = grading.accept(text, entries["alice"], payload).card
        assert (card["status"], card["error"]["kind"], card["score"]) == ("error", "grader", 0), (
            text[:200]
        )
        assert "rejected" in card["error"]["message"]
        schema.validate("scorecard", card)
    refused = grading.accept(
        json.dumps({"key": "alice", "refused": "worker w may not grade"}), entries["alice"], payload
    )
    assert (
        refused.card["error"]["kind"] == "isolation"
    )  # retried by a rerun, like a refused sandbox level
    assert grading.rejected == len(forged)


@needs_namespace
@pytest.mark.slow
def test_gpu_routing_needs_a_worker_that_offers_the_gpu_resource(runs, tls, tmp_path):
    done = _grader(
        "batch",
        str(runs.klass),
        "--out",
        str(tmp_path / "out"),
        "--dask",
        tls.address,
        *tls.flags,
        "--dask-gpu",
        *FAST,
        timeout=120,
    )
    assert done.returncode == 2 and "no Dask worker offers the GPU resource" in done.stderr, (
        done.stderr
    )
    assert "--resources GPU=1" in done.stderr and not (tmp_path / "out" / "scorecards").exists()


NOBODY = 65534
PACKAGES = sysconfig.get_paths()["purelib"]


def _unprivileged_python() -> list[str]:
    """An interpreter of this Python version that an unprivileged user may run, with our packages on its path
    (a venv's `python` may link into root's home, which that user cannot enter)."""
    env = {"PYTHONPATH": f"{ROOT}{os.pathsep}{PACKAGES}", "PATH": "/usr/bin:/bin", "HOME": "/tmp"}
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    for candidate in (
        sys.executable,
        os.path.realpath(sys.executable),
        f"/usr/bin/{version}",
        f"/usr/local/bin/{version}",
    ):
        try:
            done = subprocess.run(
                [candidate, "-c", "import distributed, grader.cluster.worker"],
                user=NOBODY,
                group=NOBODY,
                cwd="/",
                env=env,
                capture_output=True,
                timeout=120,
            )
        except OSError:
            continue
        if done.returncode == 0:
            return [candidate]
    pytest.skip(f"no {version} that user {NOBODY} may run with this environment's packages")


def _extra_worker(
    tls, scratch: Path, name: str, *args: str, user: int | None = None
) -> subprocess.Popen[bytes]:
    f = tls.files
    python = _unprivileged_python() if user is not None else [sys.executable]
    cmd = [
        *python,
        "-m",
        "distributed.cli.dask_worker",
        tls.address,
        "--nthreads",
        "1",
        "--no-nanny",
        "--no-dashboard",
        "--name",
        name,
        "--local-directory",
        str(scratch),
        "--tls-ca-file",
        str(f["ca"]),
        "--tls-cert",
        str(f["cert"]),
        "--tls-key",
        str(f["key"]),
        *args,
    ]
    env = {**os.environ, "HOME": str(scratch), "PYTHONPATH": f"{ROOT}{os.pathsep}{PACKAGES}"}
    with open(scratch / f"{name}.log", "wb") as log:
        return subprocess.Popen(
            cmd, cwd="/", env=env, user=user, group=user, stdout=log, stderr=log
        )


@needs_namespace
@pytest.mark.slow
def test_workers_that_fail_the_self_check_are_refused_by_name(runs, tls, tmp_path):
    """An unprivileged worker (no namespaces: `process` at best) and one that offers GPU=1 on a host with no GPU."""
    scratch = tls.folder / "scratch"  # where the unprivileged worker may write
    scratch.mkdir(mode=0o777, exist_ok=True)
    scratch.chmod(0o777)
    extra = [
        _extra_worker(tls, scratch, "unprivileged", user=NOBODY),
        _extra_worker(tls, scratch, "gpu-without-device", "--resources", "GPU=1"),
    ]
    try:
        try:
            tls.client.wait_for_workers(4, timeout=60)
        except TimeoutError:
            raise AssertionError(
                "\n".join(p.read_text()[-2000:] for p in scratch.glob("*.log"))
            ) from None
        names = {w["name"]: a for a, w in tls.client.scheduler_info()["workers"].items()}
        done = _grader(
            "batch",
            str(runs.klass),
            "--out",
            str(tmp_path / "out"),
            "--dask",
            tls.address,
            *tls.flags,
            "--dask-gpu",
            *FAST,
            timeout=240,
        )
    finally:
        for proc in extra:
            proc.terminate()
            proc.wait(timeout=30)
    err = done.stderr
    assert (
        done.returncode == 2
        and "refusing to grade on this Dask cluster (nothing was graded)" in err
    ), err
    assert (
        f"Dask worker {names['unprivileged']} " in err
        and "sandbox level is 'process', below the 'namespace'" in err
    )
    if not isolation.gpu_devices():
        assert (
            f"Dask worker {names['gpu-without-device']} " in err
            and "offers the GPU resource but has no GPU device" in err
        )
    assert "Traceback" not in err and not list((tmp_path / "out").glob("scorecards/*.json"))


@needs_namespace
@pytest.mark.slow
def test_the_network_probe_sees_a_sandbox_that_reaches_a_port():
    """The self-check's probe from inside a sandbox, against a port listening here: `none` reaches it, the
    namespace sandbox does not; a record that reached it refuses the worker."""
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        target = ("127.0.0.1", listener.getsockname()[1])
        open_ = hostcheck.reach([target], launch=isolation.LaunchSpec("none", slot=11))
        closed = hostcheck.reach([target], launch=isolation.LaunchSpec("namespace", slot=11))
    where = f"{target[0]}:{target[1]}"
    assert open_ == {where: "connected"} and closed[where] != "connected"
    record = {"level": "namespace", "network": open_, "fingerprint": "f", "canary": None}
    assert any(
        "its sandbox can reach the network (127.0.0.1:" in p
        for p in wire.problems(record, fingerprint="f")
    )
    assert wire.problems({**record, "network": closed}, fingerprint="f") == []


@pytest.mark.parametrize(
    ("address", "message"),
    [
        (
            "tcp://10.0.0.7:8786",
            "refusing an unencrypted, unauthenticated tcp:// connection to 10.0.0.7",
        ),
        (
            "grader-head.example.org:8786",
            "refusing an unencrypted, unauthenticated tcp:// connection to grader-head",
        ),
        ("tcp://[2001:db8::1]:8786", "connection to 2001:db8::1"),
        ("tls://10.0.0.7:8786", "TLS needs a CA and a client certificate"),
        ("local:0", "give local:N with N >= 1"),
        ("ws://10.0.0.7:8786", "must be tls://HOST:PORT"),
    ],
)
def test_addresses_that_may_not_be_used_are_usage_errors(
    capsys, tmp_path, monkeypatch, address, message
):
    for name in (
        "DASK_DISTRIBUTED__COMM__TLS__CA_FILE",
        "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT",
    ):
        monkeypatch.delenv(name, raising=False)
    klass = _make_class(tmp_path / "class")
    assert (
        main(["batch", str(klass), "--out", str(tmp_path / "out"), "--dask", address, *FAST]) == 2
    )
    err = capsys.readouterr().err
    assert message in err and err.startswith("grader: error: ") and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_conflicting_options_are_usage_errors(capsys, tmp_path):
    klass = _make_class(tmp_path / "class")
    for extra, message in (
        (["--dask", "local:2", "--shard", "1/2"], "give one of them"),
        (["--dask", "local:2", "-j", "2"], "-j sets this machine's slots"),
        (["--dask", "local:2", "--isolation", "process"], "only under the namespace sandbox"),
        (["--dask-gpu"], "go with --dask"),
        (["--dask", "tcp://127.0.0.1:1", "--dask-tls-ca", "x.pem"], "give tls://127.0.0.1:1"),
    ):
        assert main(["batch", str(klass), "--out", str(tmp_path / "out"), *extra, *FAST]) == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_payload_crosses_as_plain_module_files_and_comes_back_the_same(tmp_path):
    """What a worker receives is checked again there; written back, the intake takes it as the original."""
    from grader.intake import submission as intake

    modules = {"softmax", "masks"}
    zipped = tmp_path / "carol.zip"
    shutil.make_archive(str(zipped.with_suffix("")), "zip", ROOT / "solutions", "softmax.py")
    for source in (zipped, ROOT / "solutions" / "softmax.py", tmp_path / "carol.py"):
        if source.name == "carol.py":
            shutil.copy(
                ROOT / "solutions" / "softmax.py", source
            )  # one file, not named after a module
        payload = wire.check_payload(wire.take(source, modules=modules).plain())
        folder = tmp_path / f"w-{source.name}"
        folder.mkdir()
        again = intake.take(wire.unpack(payload, folder), modules=modules)
        assert (again.sha256, again.single_module) == (payload.sha256, payload.single_module)
        again.cleanup()
    plain = wire.take(zipped, modules=modules).plain()
    for bad in (
        {**plain, "files": {"../softmax.py": b""}},
        {**plain, "files": {".hidden.py": b""}},
        {**plain, "files": {"softmax.py": "text"}},
        {**plain, "files": {}},
        {**plain, "extra": 1},
        {**plain, "single_module": "masks"},
        {**plain, "files": {f"m{i}.py": b"" for i in range(201)}},
    ):
        with pytest.raises(wire.MessageError):
            wire.check_payload(bad)


@needs_namespace
@pytest.mark.slow
def test_summary_says_who_was_graded_with_cuda(runs):
    cards = _cards(runs.base / "dask")
    cards["alice"]["environment"]["cuda"] = (
        "NVIDIA H100 80GB HBM3"  # as a GPU worker's slot records it
    )
    cards["broken"]["environment"]["cuda"] = (
        "NVIDIA H100 80GB HBM3"  # an error card: not graded with CUDA
    )
    summary = summarize(
        sorted(cards.items()),
        assignment=manifest.load(),
        backend="namespace",
        slots=2,
        wall_s=1.0,
        skipped=0,
        exercise_ids=["softmax"],
    )
    assert summary["schema_version"] == schema.SCHEMAS["summary"]
    assert summary["cuda"] == {
        "graded": 1,
        "submissions": [{"student": "alice", "device": "NVIDIA H100 80GB HBM3"}],
    }
    with pytest.raises(schema.SchemaError):
        schema.validate("summary", {**summary, "cuda": {"graded": 1}})


def test_grader_batch_without_dask_never_imports_it():
    code = (
        "import sys; from grader.cli.main import build_parser; build_parser().parse_args(['batch', 'x', '--out', 'y']); "
        "import grader.batch.job, grader.batch.engine, grader.cli.dask, grader.cluster.messages; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr
