"""A Dask worker's self-check, measured on the worker's host by one of its grading slots (never by
the Dask worker process, which only relays).

Before a Dask worker grades anyone, the coordinator must know:

- the sandbox level it grades under: ``namespace``, or it is refused (the worker's plugin reads the
  level itself, :func:`level`, and starts no slot below it);
- that its sandbox cannot reach the network: a sandboxed worker, started exactly as a student's is
  (forked from the slot's zygote), tries to connect to the Dask worker's own listening address, its
  nanny's and the scheduler's, and every attempt must fail (the Dask protocol unpickles what it
  receives: student code reaching that port would be code execution on the trusted side);
- that it grades correctly (the canary, :mod:`grader.canary`, cached per host) and with the same
  grading inputs as the coordinator (:func:`grader.fingerprint.inputs_digest`, compared there).

The slot runs :func:`check` when asked (``{"key", "check": CONFIG}`` on its job stream) and replies
with the record, judged by :func:`grader.cluster.messages.problems`; a failure of the check itself
is reported in ``error``, never as a pass.
"""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader.course import manifest
from grader.options import launch_spec
from grader.sandbox import choice
from grader.sandbox import isolation as iso

if TYPE_CHECKING:
    from grader.sandbox.starters import WorkerStarter

PROBE_MODULE = '''
import socket

def reach(targets):
    """Try to connect to each (host, port); what happened, as text."""
    out = []
    for host, port in targets:
        try:
            socket.create_connection((host, port), timeout=3).close()
            out.append("connected")
        except OSError as exc:
            out.append(f"{type(exc).__name__}: errno {exc.errno}")
    return out
'''
CONNECT_TIMEOUT_S = 60.0


def reach(
    targets: list[tuple[str, int]], *, launch: iso.LaunchSpec, starter: WorkerStarter | None = None
) -> dict[str, str]:
    """From inside a sandbox launched as ``spec``, try to connect to each target; ``"host:port" ->
    outcome``."""
    from grader.sandbox import sweep
    from grader.sandbox.remote import SandboxBackend

    folder = sweep.tempdir("probe")
    folder.chmod(0o711)  # the sandbox uid passes through to box/, as for a submission
    box = folder / "box"
    box.mkdir(mode=0o755)
    (box / "netprobe.py").write_text(PROBE_MODULE)
    (box / "netprobe.py").chmod(0o644)
    sandbox = SandboxBackend(
        box,
        launch,
        bans={},
        time_limits={"": CONNECT_TIMEOUT_S},
        budget_s=2 * CONNECT_TIMEOUT_S,
        starter=starter,
    )
    try:
        sandbox.begin_test("dask-network-probe", "")
        outcomes = sandbox.call("netprobe", "reach", ([[h, p] for h, p in targets],), {})
    finally:
        sandbox.close()
        shutil.rmtree(folder, ignore_errors=True)
    return {f"{h}:{p}": str(o) for (h, p), o in zip(targets, outcomes)}


def level() -> dict[str, Any]:
    """This host's sandbox level, and what identifies the host (cheap: no sandbox is started)."""
    available = list(choice.available())
    return {
        "hostname": socket.gethostname(),
        "available": available,
        "level": available[0],
        "gpus": len(iso.gpu_devices()),
    }


def check(config: dict[str, Any], *, starter: WorkerStarter | None = None) -> dict[str, Any]:
    """The self-check of this host for ``config`` (targets, assignment, manifest, exercises, time
    limit, canary)."""
    record: dict[str, Any] = {
        **level(),
        "pid": os.getppid(),
    }  # run in a slot: its parent is the Dask worker
    if record["level"] != "namespace":
        return record  # refused whatever else is true: nothing else is worth a sandbox start
    assignment = _assignment(config)
    from grader import fingerprint

    record["fingerprint"] = fingerprint.inputs_digest(assignment)
    launch = launch_spec(
        assignment, "namespace", slot=starter.slot if starter else 0
    )  # as a submission's sandbox
    record["network"] = reach(
        [(h, int(p)) for h, p in config["targets"]], launch=launch, starter=starter
    )
    record.update(_canary(assignment, config))
    return record


def _assignment(config: dict[str, Any]) -> manifest.Assignment:
    """The coordinator's manifest where this host has it at the same path, else this checkout's own
    (the fingerprint then tells the coordinator whether the two agree)."""
    path = Path(config["manifest"])
    return manifest.load(path if path.is_file() else None, config["assignment"])


def _canary(assignment: manifest.Assignment, config: dict[str, Any]) -> dict[str, Any]:
    from grader import canary

    try:
        record = canary.attest(
            assignment,
            backend="namespace",
            exercises=config.get("exercises"),
            per_test_time_limit=config.get("per_test_time_limit"),
            enabled=config.get("canary", True),
        ).record
    except canary.CanaryFailed as exc:  # reported: refusing this host is the coordinator's decision
        return {"canary": None, "canary_error": str(exc)[:1000]}
    return {"canary": record, "canary_error": None if record else "the canary was switched off"}
