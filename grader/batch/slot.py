"""One grading slot: a long-lived trusted process that grades submissions one after another.

Run as ``python -m grader.batch.slot CONFIG_JSON`` by the batch pool (:mod:`grader.batch.pool`), or
by a Dask worker (:mod:`grader.cluster.worker`). Jobs arrive as JSON lines on stdin (``{"key",
"path", "student"}``; a Dask worker's self-check is ``{"key", "check"}``); one JSON line per job
goes back on the protocol stream (the original stdout; fd 1 is pointed at stderr so nothing else can
write there). Every grade goes through :func:`grader.grade.grade` (sandboxed workers), never in this
process.

Warm workers (:class:`grader.sandbox.starters.SlotStarters`): by default every sandboxed worker is
forked from this user's zygote, which imported torch once (milliseconds instead of 1-2 CPU-seconds
per worker) and which every slot of the batch shares (a zygote of the slot's own where sharing is
off); where no zygote can run, the worker for *k+1* is pre-started while *k* is graded.

Ctrl-C is the engine's business: this process ignores SIGINT and stops cleanly on SIGTERM.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from types import FrameType
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grader.course import manifest
    from grader.options import GradeOptions
    from grader.sandbox.starters import SlotStarters

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
    if config.get("watch_parent"):
        _watch_parent(os.getppid())
    try:
        return _serve(config, protocol)
    except KeyboardInterrupt:
        return 0


def _watch_parent(parent: int) -> None:
    """Stop (as on SIGTERM) as soon as the process that started us is gone: a Dask worker killed
    mid-grade must not leave its slot grading for nobody (the engine's slots learn it from stdin
    between jobs)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="watch-parent", daemon=True).start()


def _serve(config: dict[str, Any], protocol: IO[str]) -> int:
    import torch

    from grader.options import launch_spec
    from grader.sandbox import choice
    from grader.sandbox.starters import SlotStarters

    torch.set_num_threads(
        config["threads"]
    )  # the slots already use every core: no oversubscribed OpenMP spinning
    options = _options(config)
    assignment = options.load()  # once per slot, from the manifest the batch loaded
    backend = choice.choose(options.isolation, options.require_isolation)
    starts = SlotStarters(
        lambda slot: launch_spec(assignment, backend, slot=slot, threads=options.threads),
        config["slot"],
        "off" if backend == "inprocess" else config.get("warm") or "off",
        shared_wait_s=float(config.get("shared_zygote_wait_s", 0.0)),
    )
    print(
        f"slot {config['slot']}: workers {_how(starts)}", file=sys.stderr, flush=True
    )  # its log, for whoever asks why
    _send(
        protocol,
        {
            "ready": True,
            "slot": config["slot"],
            "pid": os.getpid(),
            "warm": starts.mode,
            "shared_zygote": starts.shared,
        },
    )
    try:
        for line in sys.stdin:
            job = json.loads(line)
            if os.environ.get(FAULT_ENV) and os.environ[FAULT_ENV] == job["key"]:
                os._exit(70)
            _send(
                protocol,
                _check(job, starts)
                if "check" in job
                else _grade_one(options, assignment, job, starts),
            )
    finally:
        starts.close()
    return 0


def _how(starts: SlotStarters) -> str:
    if starts.mode == "fork":
        return (
            "forked from this user's zygote"
            if starts.shared
            else "forked from this slot's own zygote"
        )
    return "pre-started (no zygote here)" if starts.mode == "start" else "started cold"


def _options(config: dict[str, Any]) -> GradeOptions:
    from grader.options import GradeOptions

    return GradeOptions(
        assignment=config["assignment"],
        manifest_path=Path(config["manifest"]),
        isolation=config["isolation"],
        require_isolation=config.get("require_isolation"),
        seed=config.get("seed"),
        threads=config["threads"],
        exercises=config.get("exercises"),
        per_test_time_limit=config.get("per_test_time_limit"),
    )


def _check(job: dict[str, Any], starts: SlotStarters) -> dict[str, Any]:
    """A Dask worker's self-check (:mod:`grader.batch.hostcheck`), its network probe forked from our
    zygote."""
    from grader.batch import hostcheck

    starter = starts.next()
    try:
        return {"key": job["key"], "check": hostcheck.check(job["check"], starter=starter)}
    except KeyboardInterrupt:
        raise
    except Exception:  # noqa: BLE001 - a check that cannot run refuses the worker, never passes it
        return {
            "key": job["key"],
            "check": {"level": "unknown", "error": traceback.format_exc(limit=6)[-1500:]},
        }
    finally:
        starts.done()


def _grade_one(
    options: GradeOptions,
    assignment: manifest.Assignment,
    job: dict[str, Any],
    starts: SlotStarters,
) -> dict[str, Any]:
    from grader.grade import GradeRefused, grade

    starter = starts.next()
    t0 = time.monotonic()
    reply: dict[str, Any] = {"key": job["key"]}
    try:
        reply["card"] = grade(
            job["path"],
            options=options,
            assignment=assignment,
            starter=starter,
            student_id=job["student"],
        )
    except GradeRefused as exc:
        reply["refused"] = str(exc)
    except KeyboardInterrupt:
        raise
    except Exception:  # noqa: BLE001 - reported to the engine as a grader error for this job
        reply["fault"] = traceback.format_exc(limit=8)[-3000:]
    finally:
        used = starts.done()  # took the pre-started worker (an unused one is killed)
    forks = reply.get("card", {}).get("isolation", {}).get("worker_forks", 0)
    reply.update(wall_s=round(time.monotonic() - t0, 4), warm=bool(used or forks))
    return reply


if __name__ == "__main__":
    sys.exit(main())
