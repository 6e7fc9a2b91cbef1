"""The wall drawn once: what a namespace sandbox can see of this machine's files, walked from inside.

A probe submission walks the sandbox's root and returns what it found as plain data. Everything it
sees must be one of: the system libraries, the interpreter (binary, libpython, standard library),
torch and its dependency closure, ``grader/inside`` and ``grader/protocol``, the submission, and the
sandbox's own /box, /tmp, /dev and /proc. Only the path leading to an allowed place may show a folder
(``/work`` leads to the venv's torch, ``/root`` to the interpreter): nothing else of them is there.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grader import schema
from grader.sandbox import isolation, mirror, view
from grader.sandbox.remote import SandboxBackend
from grader.sandbox.starters import ZygoteStarter
from grader.sandbox.zygote_client import Zygote
from tests.project.support.common import ROOT, needs_namespace

PROBE = '''
import glob, os

def look(stops, patterns):
    """Every path seen, not descending into the allowed places (``stops``), and every package folder's entries."""
    seen, stops, folders = [], set(stops), set()
    for top, dirs, files in os.walk("/"):
        seen += [os.path.join(top, name) for name in dirs + files]
        folders.update(os.path.join(top, d) for d in dirs if d.endswith(("site-packages", "dist-packages")))
        dirs[:] = [d for d in dirs if os.path.join(top, d) not in stops]
    for pattern in patterns:  # package folders inside the system binds, which the walk does not enter
        folders.update(glob.glob(pattern))
    packages = {f: sorted(os.listdir(f)) for f in sorted(folders) if os.path.isdir(f)}
    return {"seen": sorted(seen), "packages": packages, "root": sorted(os.listdir("/"))}
'''
PATTERNS = [
    f"{top}/{pattern}"
    for top in ("/usr", "/usr/lib", "/usr/local", "/lib", "/usr/local/lib")
    for pattern in ("*-packages", "python3*/*-packages", "lib/python3*/*-packages")
]

SANDBOX_OWN = ("/box", "/tmp", "/dev", "/proc", "/sys")
GRADER_INSIDE = ("/sandbox-lib/grader/inside", "/sandbox-lib/grader/protocol")


def _allowed() -> list[str]:
    return [*view.binds(False), *view.masks(), *mirror.packages(), *GRADER_INSIDE, *SANDBOX_OWN]


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory, zygote: Zygote | None) -> dict:
    box = tmp_path_factory.mktemp("probe")
    box.chmod(0o755)
    (box / "probe.py").write_text(PROBE)
    backend = SandboxBackend(
        box,
        isolation.LaunchSpec("namespace", slot=7),
        bans={},
        time_limits={"": 120},
        budget_s=300,
        starter=ZygoteStarter(zygote, 7) if zygote else None,
    )
    backend.begin_test("view", "")
    try:
        # torch's own package folders as workers see them (a mirror where the leased uid cannot reach the venv): a
        # venv under /tmp (a CI clone) sits below the sandbox's own /tmp,
        # where the walk does not descend
        torch_sites = sorted({os.path.dirname(p) for p in mirror.packages()})
        found = backend.call(
            "probe", "look", (_allowed(), [*PATTERNS, *view.masks(), *torch_sites]), {}
        )
    finally:
        backend.close()
    assert backend.forked == (zygote is not None)
    return found


def _ancestors(paths: list[str]) -> set[str]:
    return {str(parent) for p in paths for parent in Path(p).parents}


def _inside(path: str, tops: list[str]) -> bool:
    return any(path == t or path.startswith(t.rstrip("/") + "/") for t in tops)


@needs_namespace
def test_nothing_outside_the_allowlist_is_visible(seen):
    allowed = _allowed()
    leading = _ancestors(allowed)
    stray = [
        p
        for p in seen["seen"]
        if not _inside(p, allowed) and p not in leading and p != "/box/probe.py"
    ]
    assert stray == [], stray[:40]


@needs_namespace
def test_every_package_folder_holds_only_torch_and_its_closure(seen):
    closure = {os.path.basename(p) for p in mirror.packages()} | {
        mirror.SOURCE
    }  # a mirror names its source
    for folder, entries in seen["packages"].items():
        assert set(entries) <= closure, (folder, sorted(set(entries) - closure))
    assert any("torch" in entries for entries in seen["packages"].values())


@needs_namespace
@pytest.mark.parametrize(
    "name",
    [
        "jsonschema",
        "rich",
        "pytest",
        "_pytest",
        "solutions",
        "exercises",
        "tests",
        "grader",
        "attention_grader",
        "IPython",
    ],
)
def test_what_must_never_be_there(seen, name):
    entries = {e for folder in seen["packages"].values() for e in folder}
    assert not {
        e for e in entries if e == name or e.startswith(f"{name}-") or e.startswith(f"{name}.")
    }
    hits = [
        p
        for p in seen["seen"]
        if name in Path(p).parts
        and not p.startswith(GRADER_INSIDE)
        and not (name == "grader" and p == "/sandbox-lib/grader")
        and not _inside(p, list(view.binds(False)))
    ]
    assert hits == [], hits[:10]


@needs_namespace
def test_the_trusted_grader_and_the_homes_are_absent(seen):
    assert [p for p in seen["seen"] if p.startswith("/sandbox-lib/")] == [
        "/sandbox-lib/grader",
        *sorted(p for p in seen["seen"] if p.startswith(GRADER_INSIDE)),
    ]
    leading = _ancestors(_allowed())
    for home in ("/work", "/root", "/home"):
        below = [p for p in seen["seen"] if p.startswith(home + "/") or p == home]
        assert all(p in leading or _inside(p, _allowed()) for p in below), below[:10]
    assert "/home" not in seen["root"]


@needs_namespace
def test_the_interpreter_in_the_sandbox_is_the_real_binary_not_the_venvs_link():
    spec = isolation.LaunchSpec("namespace", slot=8)
    cfg = spec.config(Path("/nonexistent"), 3, 4, "/nonexistent-root")
    assert cfg["python"] == os.path.realpath(cfg["python"])
    assert cfg["python"] in view.interpreter_paths()
    assert not any("jsonschema" in p or "/rich" in p for p in cfg["packages"])


# -- a GPU inside the sandbox: the decision logic, with a fake device list (no GPU on this machine) ------
FAKE_GPUS = ["nvidia-uvm", "nvidia0", "nvidiactl"]


@pytest.mark.parametrize("backend", ["namespace", "process"])
def test_with_a_gpu_no_address_space_limit_and_an_honest_record(monkeypatch, backend):
    monkeypatch.setattr(isolation, "gpu_devices", lambda: list(FAKE_GPUS))
    spec = isolation.LaunchSpec(backend, slot=9)
    cfg = spec.config(Path("/nonexistent"), 3, 4, "/nonexistent-root")
    assert (
        cfg["address_space_limit"] is False
    )  # CUDA initialisation fails under RLIMIT_AS (measured on an H100)
    assert cfg["extra_env"] == {"GRADER_GPU_MEMORY_MB": str(spec.limits.memory_mb)}
    record = spec.describe()["gpu"]
    assert record["devices"] == FAKE_GPUS and record["address_space_limit"] is False
    assert record["gpu_memory_enforced"] is False and "advisory" in record["gpu_memory_how"]
    assert record["host_memory"] == ("cgroup+data-rlimit" if spec.cgroup_paths() else "data-rlimit")
    if backend == "namespace":
        assert cfg["gpu_devices"] == FAKE_GPUS and "/usr/local/cuda" in cfg["binds"]
    card_isolation = {**spec.describe(), "worker_starts": 1}
    schema.validate("scorecard", _card(card_isolation))


def test_without_a_gpu_the_address_space_limit_stays(monkeypatch):
    monkeypatch.setattr(isolation, "gpu_devices", lambda: [])
    spec = isolation.LaunchSpec("namespace", slot=9)
    cfg = spec.config(Path("/nonexistent"), 3, 4, "/nonexistent-root")
    assert (
        cfg["address_space_limit"] is True and cfg["extra_env"] == {} and cfg["gpu_devices"] == []
    )
    assert "gpu" not in spec.describe() and "/sys" not in cfg["binds"]


@pytest.mark.parametrize("address_space", [True, False])
def test_the_launcher_sets_rlimit_as_only_when_told(address_space):
    script = textwrap.dedent("""
        import json, resource, sys
        from grader.sandbox import launcher
        launcher.set_limits({"cpu_s": 60, "memory_mb": 4096, "file_size_mb": 32, "processes": 4096},
                            json.loads(sys.argv[1]))
        print(resource.getrlimit(resource.RLIMIT_AS)[0])
    """)
    done = subprocess.run(
        [sys.executable, "-c", script, json.dumps(address_space)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == (4096 << 20 if address_space else resource.RLIM_INFINITY)


def test_the_worker_queues_its_gpu_memory_cap_without_touching_cuda():
    script = textwrap.dedent("""
        import os, torch
        from grader.inside import gpu
        before = len(torch.cuda._queued_calls)
        assert gpu.cap_memory() is False  # no GPU exposed: nothing asked
        os.environ[gpu.ENV] = "4096"
        print(gpu.cap_memory(), len(torch.cuda._queued_calls) - before, torch.cuda.is_initialized())
    """)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "1", "False"]


def _card(isolation_record: dict) -> dict:
    return {
        "schema_version": 3,
        "assignment": "a",
        "submission": {"path": "p", "sha256": "", "layout": "folder", "files": []},
        "status": "graded",
        "error": None,
        "score": 0,
        "max_score": 0,
        "exercises": [],
        "isolation": isolation_record,
        "seed": 0,
        "grader": {"version": "0"},
        "environment": {"python": "3", "torch": "2", "cuda": None, "platform": "linux"},
        "timings": {
            "started": "2026-01-01T00:00:00Z",
            "finished": "2026-01-01T00:00:01Z",
            "total_s": 1,
        },
        "incidents": [],
        "student_output": {"stdout_bytes": 0, "stderr_bytes": 0},
    }


NESTED_BIND = textwrap.dedent("""
    import ctypes, os, sys
    sys.path.insert(0, sys.argv[1])
    from grader.sandbox import rootfs
    root, system = sys.argv[2], os.path.dirname(os.path.dirname(sys.executable))  # /usr for /usr/bin/python3.11
    rootfs.mount(None, "/", None, rootfs.REC | rootfs.PRIVATE)
    rootfs.mount("tmpfs", root, "tmpfs", 0, "size=1m")
    rootfs.bind_ro(system, root + system)
    rootfs.bind_ro(os.path.realpath(sys.executable), root + os.path.realpath(sys.executable))  # inside that bind
    print(os.path.exists(root + os.path.realpath(sys.executable)))
""")


@needs_namespace
@pytest.mark.skipif(
    not os.path.realpath("/usr/bin/python3").startswith("/usr/"),
    reason="needs a system Python in /usr",
)
def test_the_running_interpreter_inside_a_bound_system_folder_binds(tmp_path):
    """Ubuntu's Python is /usr/bin/python3.12, inside the /usr bind: re-creating it as a mount point opened the running
    interpreter for writing (ETXTBSY), and no sandbox ever started on such a machine (seen on a GPU host)."""
    python = os.path.realpath("/usr/bin/python3")
    out = subprocess.run(
        ["unshare", "-m", python, "-I", "-c", NESTED_BIND, str(isolation.LIB_ROOT), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and out.stdout.strip() == "True", out.stderr[-2000:]
