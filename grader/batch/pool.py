"""The pool of grading slots: long-lived trusted processes fed one submission at a time.

A slot that dies, hangs past the watchdog or never starts is replaced; its submission gets a
``grader`` error scorecard (never a student failure), and the batch goes on.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from grader import procs
from grader.batch import cards
from grader.batch.results import BatchFault, Options, Result
from grader.cardtypes import ErrorKind
from grader.course import manifest
from grader.intake.classfolder import Entry
from grader.options import launch_spec
from grader.sandbox.levels import BackendName
from grader.sandbox.starters import lane_slot

WATCHDOG_SLACK_S = 120.0
MAX_STARTUP_FAILURES = 3


def slot_config(
    n: int, *, options: Options, assignment: manifest.Assignment, backend: BackendName
) -> dict[str, Any]:
    """The JSON configuration of slot ``n`` (``python -m grader.batch.slot CONFIG``): plain data."""
    o = options
    # the manifest this command loaded, absolute: the slot runs in /, and must grade what the canary
    # proved
    return {
        "slot": n,
        "threads": o.threads,
        "assignment": assignment.id,
        "manifest": os.path.abspath(assignment.manifest),
        "isolation": backend,
        "require_isolation": o.require_isolation,
        "exercises": o.exercises,
        "per_test_time_limit": o.per_test_time_limit,
        "warm": o.warm,
        "seed": o.seed,
    }


class SlotProcess:
    """One ``python -m grader.batch.slot`` process, seen from the engine: a job in, JSON lines
    out."""

    def __init__(self, n: int, config: dict[str, Any], log: Path) -> None:
        self.n, self.deadline, self.ready, self.buffer = n, 0.0, False, b""
        self.started = time.monotonic()
        with open(log, "ab") as err:
            # isolated from the folder the batch was started in (it may be the class folder itself)
            self.proc = subprocess.Popen(
                procs.module_argv("grader.batch.slot", json.dumps(config)),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                start_new_session=True,
                **procs.popen_kwargs(),
            )
        self.job: Entry | None = None

    def send(self, entry: Entry) -> bool:
        try:
            assert self.proc.stdin is not None
            # absolute: the slot runs in the root directory, not where the batch was started
            self.proc.stdin.write(
                (
                    json.dumps(
                        {
                            "key": entry.key,
                            "path": os.path.abspath(entry.path),
                            "student": entry.student,
                        }
                    )
                    + "\n"
                ).encode()
            )
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return False
        return True

    def lines(self) -> list[dict[str, Any]] | None:
        """Messages read now; ``None`` at end of stream (the slot ended)."""
        assert self.proc.stdout is not None
        chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
        if not chunk:
            return None
        self.buffer += chunk
        *complete, self.buffer = self.buffer.split(b"\n")
        try:
            return [json.loads(line) for line in complete if line.strip()]
        except ValueError:
            return None  # a broken protocol stream: treated like a dead slot

    def stop(self, grace: float = 5.0) -> None:
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=grace)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream:
                    stream.close()
            except OSError:
                pass


class Pool:
    """The slots of one run: start them, feed them one submission each, replace a dead or hung
    one."""

    def __init__(
        self, *, out: Path, options: Options, assignment: manifest.Assignment, backend: BackendName
    ) -> None:
        self.out, self.options, self.assignment, self.backend = out, options, assignment, backend
        self.slots: list[SlotProcess] = []
        self.selector = selectors.DefaultSelector()
        self.starts = self.deaths = self.startup_failures = 0
        self.watchdog = assignment.limits.submission_wall_s + WATCHDOG_SLACK_S
        self.shared_wait_s = 0.0

    def _config(self, n: int) -> dict[str, Any]:
        return {
            **slot_config(
                n, options=self.options, assignment=self.assignment, backend=self.backend
            ),
            "shared_zygote_wait_s": self.shared_wait_s,
        }

    def _share_zygote(self) -> None:
        """Every slot forks its workers from this user's zygote
        (:mod:`grader.sandbox.shared_zygote`), started now if none runs, while the slots import
        torch: one zygote for the whole batch (and the runs after it) instead of one per slot, each
        1.4-2 CPU-seconds. Off with ``--warm start/off`` or ``GRADER_KEEP_WARM=0``."""
        from grader.sandbox import shared_zygote
        from grader.sandbox.zygote_client import FORKABLE

        if self.options.warm == "fork" and self.backend in FORKABLE and shared_zygote.ensure():
            self.shared_wait_s = shared_zygote.WARM_UP_WAIT_S

    def _start(self, n: int) -> SlotProcess:
        self.starts += 1
        slot = SlotProcess(n, self._config(n), self.out / "logs" / f"slot-{n}.log")
        assert slot.proc.stdout is not None
        self.selector.register(slot.proc.stdout, selectors.EVENT_READ, slot)
        self.slots.append(slot)
        return slot

    def _retire(self, slot: SlotProcess) -> None:
        try:
            assert slot.proc.stdout is not None
            self.selector.unregister(slot.proc.stdout)
        except (KeyError, ValueError):
            pass
        slot.stop()
        self.slots.remove(slot)

    def _error(
        self, entry: Entry, kind: ErrorKind, message: str, slot: int, seconds: float = 0.0
    ) -> Result:
        launch = launch_spec(
            self.assignment, self.backend, slot=lane_slot(slot, 0), threads=self.options.threads
        )
        card = cards.error_card(
            assignment=self.assignment,
            launch=launch,
            path=entry.path,
            student=entry.student,
            kind=kind,
            message=message,
            seconds=seconds,
            exercises=self.options.exercises,
        )
        return Result(entry, card, wall_s=seconds)

    def grade(self, todo: list[Entry], jobs: int) -> Iterator[Result]:
        pending = deque(todo)
        if pending:
            self._share_zygote()
        for n in range(jobs if pending else 0):
            self._start(n)
        while pending or any(s.job for s in self.slots):
            now = time.monotonic()
            for key, _ in self.selector.select(1.0):
                slot: SlotProcess = key.data
                messages = slot.lines()
                if messages is None:
                    yield from self._died(slot, pending, "ended")
                    continue
                for message in messages:
                    if slot.job is not None and message.get("key") == slot.job.key:
                        yield self._result(slot, message)
                        slot.job = None
                    slot.ready = slot.ready or bool(message.get("ready"))
                self._feed(slot, pending)
            for slot in [s for s in self.slots if s.job is not None and now > s.deadline]:
                yield from self._died(
                    slot, pending, f"ran past the {self.watchdog:.0f} s watchdog and was stopped"
                )
            for slot in [s for s in self.slots if not s.ready and now - s.started > 300]:
                yield from self._died(slot, pending, "did not start within 300 s")

    def _feed(self, slot: SlotProcess, pending: deque[Entry]) -> None:
        if not slot.ready or slot.job is not None:
            return
        if not pending:
            self._retire(slot)
            return
        entry = pending.popleft()
        if slot.send(entry):
            slot.job, slot.deadline = entry, time.monotonic() + self.watchdog
        else:
            pending.appendleft(entry)  # never started: the death is seen on the next read

    def _died(self, slot: SlotProcess, pending: deque[Entry], how: str) -> Iterator[Result]:
        entry, n, ready = slot.job, slot.n, slot.ready
        self._retire(slot)
        self.deaths += 1
        code = slot.proc.returncode
        log = self.out / "logs" / f"slot-{n}.log"
        if entry is not None:
            seconds = time.monotonic() - (slot.deadline - self.watchdog)
            yield self._error(
                entry,
                "grader",
                f"the grading slot process {how} (exit status {code}) while grading "
                f"this submission; see {log}; rerun the batch to retry it",
                n,
                seconds,
            )
        elif not ready:
            self.startup_failures += 1
            if self.startup_failures >= MAX_STARTUP_FAILURES:
                tail = log.read_text("utf-8", "replace")[-600:] if log.exists() else ""
                raise BatchFault(f"grading slots cannot start (see {log}): {tail.strip()}")
        if pending:
            self._start(n)

    def _result(self, slot: SlotProcess, message: dict[str, Any]) -> Result:
        entry = slot.job
        assert entry is not None
        wall = float(message.get("wall_s", 0.0))
        if "card" in message:
            return Result(entry, message["card"], wall_s=wall, warm=bool(message.get("warm")))
        if "refused" in message:
            return self._error(entry, "isolation", message["refused"], slot.n, wall)
        return self._error(
            entry, "grader", f"grader fault: {message.get('fault', 'unknown')}", slot.n, wall
        )

    def stop(self) -> None:
        for slot in list(self.slots):
            self._retire(slot)
        self.selector.close()
