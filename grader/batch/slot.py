"""One grading slot: a long-lived trusted process that grades submissions one after another.

Run as ``python -m grader.batch.slot CONFIG_JSON`` by the batch pool (:mod:`grader.batch.pool`). Jobs arrive as JSON lines
on stdin (``{"key", "path", "student"}``); one JSON line per job goes back on the protocol stream
(the original stdout; fd 1 is pointed at stderr so nothing else can write there). Every grade goes
through :func:`grader.grade.grade` (sandboxed workers), never in this process.

Warm workers (see :class:`_Starts`): by default every sandboxed worker is forked from this slot's
zygote, which imported torch once (milliseconds instead of 1-2 CPU-seconds per worker); where no
zygote can run, the worker for *k+1* is pre-started while *k* is graded (``WarmChannel``).

Ctrl-C is the engine's business: this process ignores SIGINT and stops cleanly on SIGTERM.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from types import FrameType
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: a slot loads the sandbox client only when it pre-starts a worker
    from grader.sandbox.remote import WarmChannel

FAULT_ENV = "GRADER_BATCH_SLOT_FAULT"  # tests only: a key whose job makes this slot die (os._exit)


def _stop(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _send(stream: IO[str], message: dict[str, Any]) -> None:
    stream.write(json.dumps(message) + "\n")
    stream.flush()


def main(argv: list[str] | None = None) -> int:
    config = json.loads((argv or sys.argv[1:])[0])
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _stop)
    try:
        return _serve(config, protocol)
    except KeyboardInterrupt:
        return 0


def _serve(config: dict[str, Any], protocol: IO[str]) -> int:
    import torch

    from grader import manifest
    from grader.grade import launch_spec
    from grader.sandbox import isolation as iso

    torch.set_num_threads(config["threads"])  # the slots already use every core: no oversubscribed OpenMP spinning
    assignment = manifest.load(None, config["assignment"])
    backend = iso.choose(config["isolation"], config.get("require_isolation"))
    lanes = [launch_spec(assignment, backend, slot=2 * config["slot"] + i, threads=config["threads"]) for i in (0, 1)]
    starts = _Starts(lanes, "off" if backend == "inprocess" else config.get("warm") or "off")
    _send(protocol, {"ready": True, "slot": config["slot"], "pid": os.getpid(), "warm": starts.mode})
    try:
        for line in sys.stdin:
            job = json.loads(line)
            if os.environ.get(FAULT_ENV) and os.environ[FAULT_ENV] == job["key"]:
                os._exit(70)
            _send(protocol, _grade_one(config, job, starts))
    finally:
        starts.close()
    return 0


def _grade_one(config: dict[str, Any], job: dict[str, Any], starts: _Starts) -> dict[str, Any]:
    from grader.grade import GradeRefused, grade

    slot, warm, zygote = starts.next()
    t0 = time.monotonic()
    reply: dict[str, Any] = {"key": job["key"]}
    try:
        reply["card"] = grade(job["path"], assignment=config["assignment"], isolation=config["isolation"],
                              require_isolation=config.get("require_isolation"), seed=config.get("seed"),
                              slot=slot, threads=config["threads"], student_id=job["student"],
                              exercises=config.get("exercises"), per_test_time_limit=config.get("per_test_time_limit"),
                              warm=warm, zygote=zygote)
    except GradeRefused as exc:
        reply["refused"] = str(exc)
    except KeyboardInterrupt:
        raise
    except Exception:  # noqa: BLE001 - reported to the engine as a grader error for this job
        reply["fault"] = traceback.format_exc(limit=8)[-3000:]
    finally:
        used = warm is not None and warm.taken
        if warm is not None:
            warm.discard()
    forks = reply.get("card", {}).get("isolation", {}).get("worker_forks", 0)
    reply.update(wall_s=round(time.monotonic() - t0, 4), warm=bool(used or forks))
    return reply


class _Starts:
    """How this slot's workers start: ``fork`` (a zygote), ``start`` (pre-started warm workers) or ``off`` (cold).

    ``fork`` falls back to ``start`` where no zygote can run (bwrap) or it keeps failing. Pre-started
    workers alternate between two launch slots ("lanes"): the worker for k+1 imports torch while k is
    graded, and two in-flight workers never share a uid or a cgroup (killing one must not touch the other).
    """

    ZYGOTE_RESTARTS = 3

    def __init__(self, lanes: list[Any], mode: str) -> None:
        from grader.sandbox.zygote_client import FORKABLE

        self.lanes, self.lane, self.restarts = lanes, 0, 0
        self.mode = "start" if mode == "fork" and lanes[0].backend not in FORKABLE else mode
        self.zygote: Any = None
        self.warm: Any = None
        if self.mode == "fork" and not self._zygote():
            self.mode = "start"
        if self.mode == "start":
            self.warm = self._prestart()

    def next(self) -> tuple[int, Any, Any]:
        """(launch slot, warm worker or None, zygote or None) for the next submission."""
        current, slot = self.warm, self.lanes[self.lane].slot
        self.lane = 1 - self.lane
        if self.mode == "start":
            self.warm = self._prestart()  # k+1's worker imports torch while k is graded
        if self.mode == "fork" and not (self.zygote and self.zygote.alive) and not self._zygote():
            self.mode, current = "start", None
            self.warm = self._prestart()
        return slot, current, self.zygote if self.mode == "fork" else None

    def _zygote(self) -> bool:
        from grader.sandbox.zygote_client import Zygote

        if self.zygote is not None:
            self.zygote.close()
        self.restarts += 1
        self.zygote = Zygote() if self.restarts <= self.ZYGOTE_RESTARTS + 1 else None
        return self.zygote is not None and self.zygote.wait_ready()

    def _prestart(self) -> WarmChannel:
        from grader.sandbox.remote import WarmChannel

        return WarmChannel(self.lanes[self.lane])

    def close(self) -> None:
        if self.warm is not None:
            self.warm.discard()
        if self.zygote is not None:
            self.zygote.close()


if __name__ == "__main__":
    sys.exit(main())
