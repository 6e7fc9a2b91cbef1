"""The cluster recipes in examples/cluster, run or validated as written (issues 28.14 and 28.16).

- The Dask recipe's scheduler and worker commands, taken from its README and run in a private network namespace
  (loopback addresses stand for the hosts' addresses on the grading network): every socket they listen on (the
  scheduler, the worker, its nanny and their children, IPv4 and IPv6, read from /proc) is bound to the address
  it is meant for, none to a wildcard. On 4ad1d57 the recipe left the scheduler's HTTP server (health, metrics)
  and the worker's two ports on 0.0.0.0 and [::], though it said --no-dashboard.
- Both Kubernetes manifests validate, strictly, against the Kubernetes JSON schemas of every release from 1.29
  (the README's minimum) to the newest that ``kubernetes-validate`` carries; before 1.28 the Indexed Job's
  per-index retry fields do not exist, which is why 1.29 is the minimum.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.project.support.common import ROOT

pytestmark = pytest.mark.cost(60)  # four RSA keys, a scheduler and a worker

CLUSTER = ROOT / "examples" / "cluster"
HEAD, SELF = (
    "127.0.0.2",
    "127.0.0.3",
)  # the head node's and a grading host's addresses, in the test's namespace


# -- Kubernetes -------------------------------------------------------------------------------------------------
def _versions() -> list[str]:
    kv = pytest.importorskip("kubernetes_validate")
    folder = Path(kv.__file__).parent / "kubernetes-json-schema"
    found = {
        m[1] for p in folder.iterdir() if (m := re.fullmatch(r"v(\d+\.\d+\.\d+)-local", p.name))
    }
    return sorted(found, key=lambda v: tuple(int(x) for x in v.split(".")))


def _manifests() -> dict[str, list[dict]]:
    return {
        name: [d for d in yaml.safe_load_all((CLUSTER / name).read_text()) if d]
        for name in ("k8s-indexed-job.yaml", "k8s-merge-job.yaml")
    }


def test_the_kubernetes_manifests_validate_against_every_release_from_1_29():
    import kubernetes_validate as kv

    versions = [v for v in _versions() if tuple(map(int, v.split(".")[:2])) >= (1, 29)]
    assert len(versions) >= 5 and versions[0] == "1.29.0", versions
    for docs in _manifests().values():
        for version in versions:
            for doc in docs:
                kv.validate(
                    doc, version, strict=True
                )  # raises, naming the field, on anything unknown or wrong
    old = next(v for v in _versions() if v.startswith("1.27."))
    with pytest.raises(kv.ValidationError, match="backoffLimitPerIndex"):
        kv.validate(_manifests()["k8s-indexed-job.yaml"][0], old, strict=True)
    readme = (CLUSTER / "README.md").read_text()
    assert (
        "Kubernetes\n  1.29 or newer" in readme
        and "Kubernetes >= 1.29" in (CLUSTER / "k8s-indexed-job.yaml").read_text()
    )


# -- Dask -------------------------------------------------------------------------------------------------------
def _recipe() -> dict[str, str]:
    """The README's shell block: the certificate lines, and the scheduler's and worker's commands (joined)."""
    text = (CLUSTER / "README.md").read_text()
    block = text[text.index("## A Dask cluster") :]
    block = block[block.index("```bash\n") + 8 :]
    block = block[: block.index("```")].replace("\\\n", " ")
    lines = [line for line in block.splitlines() if line and not line.startswith("#")]
    return {
        "certificates": "\n".join(
            lines[: lines.index(next(x for x in lines if x.startswith("dask ")))]
        ),
        "scheduler": next(x for x in lines if x.startswith("dask scheduler")),
        "worker": next(x for x in lines if x.startswith("dask worker")),
    }


SCRIPT = """
set -e
ip link set lo up
{certificates}
wait_for() {{  # a log line, while its process lives (a bounded number of looks)
  for _ in $(seq 3000); do grep -q "$2" "$1" 2>/dev/null && return 0; kill -0 "$3" || return 1; sleep 0.1; done
  return 1
}}
{scheduler} > scheduler.log 2>&1 &
scheduler=$!
wait_for scheduler.log "Scheduler at" $scheduler
{worker} > worker.log 2>&1 &
worker=$!
wait_for worker.log "Registered to" $worker
echo "ready $scheduler $worker"
read -r _ || true
kill $worker $scheduler
wait
"""


def _listening(pid: int) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket in LISTEN held by ``pid`` and its descendants, from /proc."""
    pids = _tree(pid)
    inodes = set()
    for p in pids:
        for fd in Path(f"/proc/{p}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    found = set()
    for table, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                address, port = fields[1].split(":")
                found.add((_address(address, family), int(port, 16)))
    return found


def _address(hexed: str, family: int) -> str:
    raw = bytes.fromhex(hexed)
    words = b"".join(
        raw[i : i + 4][::-1] for i in range(0, len(raw), 4)
    )  # each 32-bit word in host (little) order
    return socket.inet_ntop(family, words)


def _tree(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = set(), [root]
    while todo:
        pid = todo.pop()
        out.add(pid)
        todo += children.get(pid, [])
    return out


@pytest.mark.skipif(
    os.geteuid() != 0
    or not shutil.which("unshare")
    or not shutil.which("ip")
    or not shutil.which("openssl"),
    reason="needs root, unshare, ip and openssl for a private network",
)
def test_the_dask_recipe_binds_every_listener_to_the_address_it_means(tmp_path):
    pytest.importorskip("distributed")
    recipe = _recipe()
    assert "--no-dashboard" in recipe["scheduler"] and "--no-dashboard" in recipe["worker"]
    dask = str(Path(sys.executable).parent / "dask")
    script = SCRIPT.format(
        **{
            k: v.replace("dask ", f"{dask} ", 1) if k != "certificates" else v
            for k, v in recipe.items()
        }
    )
    env = {**os.environ, "HEAD": HEAD, "SELF": SELF}
    proc = subprocess.Popen(
        ["unshare", "--net", "--", "bash", "-c", script],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdin is not None
    try:
        ready = proc.stdout.readline().split()  # the script says so once the worker has registered
        logs = "".join(
            (tmp_path / n).read_text()
            for n in ("scheduler.log", "worker.log")
            if (tmp_path / n).exists()
        )
        assert ready[:1] == ["ready"], logs[-3000:]
        scheduler, worker = _listening(int(ready[1])), _listening(int(ready[2]))
    finally:
        proc.stdin.close()  # the script then stops both
        proc.wait(timeout=120)
    assert (HEAD, 8786) in scheduler and ("127.0.0.1", 8787) in scheduler, (
        scheduler
    )  # the comm and HTTP servers
    assert {a for a, _ in worker} >= {SELF, "127.0.0.1"} and len(worker) >= 3, (
        worker
    )  # worker, nanny, HTTP
    for who, meant, sockets in (("scheduler", HEAD, scheduler), ("worker", SELF, worker)):
        wrong = {s for s in sockets if s[0] not in (meant, "127.0.0.1")}
        assert not wrong, (
            f"the {who} listens on {sorted(wrong)} (meant: {meant}, and 127.0.0.1 for HTTP)"
        )
