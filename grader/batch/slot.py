"""One grading slot: a long-lived trusted process that grades submissions one after another.

Run as ``python -m grader.batch.slot CONFIG_JSON`` by the batch engine. Jobs arrive as JSON lines
on stdin (``{"key", "path", "student"}``); one JSON line per job goes back on the protocol stream
(the original stdout; fd 1 is pointed at stderr so nothing else can write there). Every grade goes
through :func:`grader.grade.grade` (sandboxed workers), never in this process.

Warm workers: while submission *k* is graded, the sandboxed worker for *k+1* is already started and
importing torch (``WarmChannel``); it receives its files through the setup frame. The two in-flight
workers never share a uid or a cgroup (killing one must not touch the other): slot N alternates
between the launch slots 2N and 2N+1 ("lanes").

Ctrl-C is the engine's business: this process ignores SIGINT and stops cleanly on SIGTERM.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from typing import IO, Any

FAULT_ENV = "GRADER_BATCH_SLOT_FAULT"  # tests only: a key whose job makes this slot die (os._exit)


def _stop(signum: int, frame: Any) -> None:
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
    from grader import manifest
    from grader.grade import GradeRefused, grade, launch_spec
    from grader.sandbox import isolation as iso
    from grader.sandbox.remote import WarmChannel

    assignment = manifest.load(None, config["assignment"])
    backend = config["isolation"] if config["isolation"] == "inprocess" else iso.choose(
        config["isolation"], config.get("require_isolation"))
    lanes = [launch_spec(assignment, backend, slot=2 * config["slot"] + i, threads=config["threads"]) for i in (0, 1)]
    lane = 0
    use_warm = bool(config.get("warm")) and backend != "inprocess"
    warm: WarmChannel | None = WarmChannel(lanes[lane]) if use_warm else None
    if warm is not None and not warm.wait_ready():
        warm = None
    _send(protocol, {"ready": True, "slot": config["slot"], "pid": os.getpid()})
    try:
        for line in sys.stdin:
            job = json.loads(line)
            if os.environ.get(FAULT_ENV) and os.environ[FAULT_ENV] == job["key"]:
                os._exit(70)
            current, warm, slot = warm, None, lanes[lane].slot
            lane = 1 - lane
            if use_warm:
                warm = WarmChannel(lanes[lane])  # k+1's worker imports torch while k is graded
            t0 = time.monotonic()
            reply: dict[str, Any] = {"key": job["key"]}
            try:
                reply["card"] = grade(job["path"], assignment=config["assignment"], isolation=config["isolation"],
                                      require_isolation=config.get("require_isolation"), seed=config.get("seed"),
                                      slot=slot, threads=config["threads"], student_id=job["student"],
                                      exercises=config.get("exercises"),
                                      per_test_time_limit=config.get("per_test_time_limit"), warm=current)
            except GradeRefused as exc:
                reply["refused"] = str(exc)
            except KeyboardInterrupt:
                raise
            except Exception:  # noqa: BLE001 - reported to the engine as a grader error for this job
                reply["fault"] = traceback.format_exc(limit=8)[-3000:]
            finally:
                used = current is not None and current.taken
                if current is not None:
                    current.discard()
            reply.update(wall_s=round(time.monotonic() - t0, 4), warm=used)
            _send(protocol, reply)
    finally:
        if warm is not None:
            warm.discard()
    return 0


if __name__ == "__main__":
    sys.exit(main())
