"""The Dask worker's side of ``grader batch --dask``: a worker plugin that keeps grading slots, and
the tasks.

Loaded only where Dask is (the coordinator of a ``--dask`` run and the Dask workers): ``grader
batch`` without ``--dask`` never imports this module or Dask.

:class:`GradingPlugin` is registered by the coordinator for one run. On each Dask worker, present or
joining later, it starts a :class:`Host`: one grading slot per worker thread (``python -m
grader.batch.slot``, the very process a single-machine batch uses, with its zygote; the Dask worker
process itself only relays and never imports torch or runs pytest) and the worker's self-check
(:mod:`grader.batch.hostcheck`) in the background. A task (:func:`grade_task`) refuses to grade
until that check has passed, writes the submission it was sent into a private folder, hands it to an
idle slot and returns the slot's reply as JSON text. A slot that dies or overruns its watchdog is
replaced and the reply says so (a grader error for the coordinator); a Dask worker that dies takes
its slots with it (they watch their parent) and the scheduler runs its tasks elsewhere.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import select
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from distributed import WorkerPlugin, get_worker
from distributed.comm.addressing import get_address_host_port
from distributed.worker import Worker

from grader.batch import hostcheck
from grader.batch.pool import SlotProcess
from grader.cluster import messages as wire
from grader.course import manifest

CHECK_TIMEOUT_S = 1800.0  # a first canary of every exercise on a slow host; cached afterwards
STARTUP_S = 300.0  # a slot's zygote start, as the engine's pool allows


class GradingPlugin(WorkerPlugin):
    """One run's grading on every Dask worker (``config``: plain data made by the coordinator)."""

    idempotent = False

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.host: Host | None = None

    def setup(self, worker: Worker) -> None:
        nthreads = int(worker.state.nthreads)
        self.host = Host(
            self.config,
            address=worker.address,
            targets=targets(worker),
            nthreads=nthreads,
            resources=dict(worker.state.total_resources),
        )

    async def teardown(self, worker: Worker) -> None:
        if self.host is None:
            return
        try:
            await asyncio.to_thread(
                self.host.close
            )  # slots stop within seconds, off the event loop
        except asyncio.CancelledError:
            self.host.close()  # the worker is closing: its slots stop before it goes, not after


def targets(worker: Worker) -> list[tuple[str, int]]:
    """Every address of the Dask side this worker's sandbox must not reach: its listeners, nanny,
    scheduler."""
    addresses = [listener.contact_address for listener in worker.listeners]
    addresses += [a for a in (worker.nanny, worker.scheduler.address) if a]
    found: list[tuple[str, int]] = []
    for address in addresses:
        host, port = get_address_host_port(address)
        for h in (host, "127.0.0.1"):  # a worker bound to every interface answers on loopback too
            if (h, port) not in found and h not in ("0.0.0.0", "::"):
                found.append((h, port))
    return found


class Host:
    """One Dask worker process's slots and self-check (see the module docstring)."""

    def __init__(
        self,
        config: dict[str, Any],
        *,
        address: str,
        targets: list[tuple[str, int]],
        nthreads: int,
        resources: dict[str, float],
    ) -> None:
        self.config, self.address = config, address
        self.scratch = Path(tempfile.mkdtemp(prefix="grader-dask-"))
        self.record: dict[str, Any] = {}
        self.checked = threading.Event()
        self.idle: queue.SimpleQueue[SlotProcess] = queue.SimpleQueue()
        self.slots: dict[int, SlotProcess] = {}
        self.lock = threading.Lock()
        self.closed = False
        facts = {"worker": address, "resources": resources, "nthreads": nthreads}
        threading.Thread(
            target=self._prepare,
            args=(targets, max(1, nthreads), facts),
            name="grader-self-check",
            daemon=True,
        ).start()

    def _start(self, n: int) -> SlotProcess:
        slot = {**self.config["slot"], "slot": n, "watch_parent": True}
        path = Path(slot["manifest"])
        if (
            not path.is_file()
        ):  # this host's own checkout (the self-check's fingerprint says it is the same)
            slot["manifest"] = os.path.abspath(manifest.load(None, slot["assignment"]).manifest)
        with self.lock:
            if self.closed:
                raise RuntimeError("the grading plugin was removed")
            self.slots[n] = SlotProcess(n, slot, self.scratch / f"slot-{n}.log")
            return self.slots[n]

    def _prepare(
        self, targets: list[tuple[str, int]], nthreads: int, facts: dict[str, Any]
    ) -> None:
        """Below the namespace sandbox: the record says so and no slot starts. Else start the slots,
        and the first one checks the network from a sandbox and the canary before anyone is
        graded."""
        try:
            record = {**hostcheck.level(), "pid": os.getpid()}
            if record["level"] == wire.REQUIRED_LEVEL:
                slots = [self._start(n) for n in range(nthreads)]
                job = {
                    "key": "self-check",
                    "check": {**self.config["probe"], "targets": [list(t) for t in targets]},
                }
                slots[0], reply = self._ask(slots[0], job, CHECK_TIMEOUT_S)
                for slot in slots:
                    self.idle.put(slot)
                record = wire.check_record(
                    reply.get("check", {"level": "unknown", "error": reply.get("fault")})
                )
        except Exception as exc:  # noqa: BLE001 - a check that cannot run refuses this worker, never passes it
            record = {"level": "unknown", "error": f"{type(exc).__name__}: {exc}"}
        self.record = {**record, **facts}
        self.checked.set()

    def verdict(self) -> str:
        """Why this worker may not grade ("" when it may), once its self-check is done."""
        if not self.checked.wait(CHECK_TIMEOUT_S + STARTUP_S):
            return "its self-check did not finish"
        gpu = bool(self.config.get("gpu")) and bool(self.record.get("resources", {}).get("GPU"))
        found = wire.problems(self.record, fingerprint=self.config["fingerprint"], gpu=gpu)
        canary = (
            wire.canary_problem(self.record) if self.config["probe"].get("canary", True) else ""
        )
        return "; ".join(found + ([canary] if canary else []))

    def grade(self, key: str, student: str, plain: object) -> dict[str, Any]:
        """Grade one submission on an idle slot; the slot's reply, with this worker's name and
        canary."""
        reason = self.verdict()
        if reason:
            return {"key": key, "refused": f"Dask worker {self.address} may not grade: {reason}"}
        try:
            payload = wire.check_payload(plain)
        except wire.MessageError as exc:
            return {
                "key": key,
                "fault": f"the submission sent to {self.address} was malformed: {exc}",
            }
        folder = Path(tempfile.mkdtemp(dir=self.scratch, prefix="sub-"))
        slot = self.idle.get()
        try:
            job = {"key": key, "path": str(wire.unpack(payload, folder)), "student": student}
            slot, reply = self._ask(slot, job, self.config["watchdog_s"])
        finally:
            self.idle.put(slot)
            shutil.rmtree(folder, ignore_errors=True)
        kept: dict[str, Any] = {
            k: reply[k] for k in ("card", "refused", "fault", "wall_s", "warm") if k in reply
        }
        return {**kept, "key": key, "worker": self.address, "canary": self.record.get("canary")}

    def _ask(
        self, slot: SlotProcess, job: dict[str, Any], limit: float
    ) -> tuple[SlotProcess, dict[str, Any]]:
        """Send ``job`` to ``slot``, wait for its reply; a dead or overrunning slot is replaced (its
        reply: a fault)."""
        if slot.proc.poll() is not None:
            slot = self._replace(slot)
        deadline = time.monotonic() + limit + (0 if slot.ready else STARTUP_S)
        stream = slot.proc.stdout
        assert stream is not None and slot.proc.stdin is not None  # pipes: SlotProcess starts it so
        try:
            slot.proc.stdin.write((json.dumps(job) + "\n").encode())
            slot.proc.stdin.flush()
        except OSError:
            return self._replace(slot), {
                "fault": f"the grading slot process on {self.address} could not be sent the job"
            }
        while time.monotonic() < deadline:
            readable, _, _ = select.select(
                [stream], [], [], min(5.0, max(0.0, deadline - time.monotonic()))
            )
            messages = slot.lines() if readable else []
            if messages is None:
                return self._replace(slot), {
                    "fault": f"the grading slot process on {self.address} ended (exit status "
                    f"{slot.proc.poll()}) while grading this submission; its log "
                    f"ends: {self._tail(slot)}"
                }
            for message in messages:
                slot.ready = slot.ready or bool(message.get("ready"))
                if message.get("key") == job["key"]:
                    return slot, message
        return self._replace(slot), {
            "fault": f"the grading slot process on {self.address} ran past the "
            f"{limit:.0f} s watchdog and was stopped"
        }

    def _tail(self, slot: SlotProcess) -> str:
        """The end of a slot's log: it lives on this host, in a folder removed with the plugin."""
        try:
            return (self.scratch / f"slot-{slot.n}.log").read_text("utf-8", "replace")[
                -600:
            ].strip() or "(empty)"
        except OSError:
            return "(no log)"

    def _replace(self, slot: SlotProcess) -> SlotProcess:
        slot.stop()
        return self._start(slot.n)

    def close(self) -> None:
        with self.lock:
            self.closed = True
            slots = list(self.slots.values())
        for slot in slots:
            slot.stop()
        shutil.rmtree(self.scratch, ignore_errors=True)


def _host(name: str, worker: Worker) -> Host:
    plugin = worker.plugins.get(name)
    if not isinstance(plugin, GradingPlugin) or plugin.host is None:
        raise RuntimeError(
            f"the grading plugin {name!r} is not set up on Dask worker {worker.address}"
        )
    return plugin.host


def grade_task(name: str, key: str, student: str, payload: object) -> str:
    """One submission, graded on the Dask worker that runs this task: the reply as JSON text (plain
    data)."""
    worker = get_worker()
    return json.dumps(_host(name, worker).grade(key, student, payload))


async def self_check(name: str, dask_worker: Worker) -> str:
    """This worker's self-check record as JSON text, once done (for ``Client.run``: it does not
    block the loop)."""
    host = _host(name, dask_worker)
    await asyncio.to_thread(host.checked.wait, CHECK_TIMEOUT_S)
    return json.dumps(host.record or {"level": "unknown", "error": "the self-check did not finish"})
