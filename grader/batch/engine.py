"""The batch engine: parallel grading slots, resumable, one scorecard written as soon as it is ready.

Each slot is a long-lived trusted process (``python -m grader.batch.slot``, in its own session so a
terminal's Ctrl-C reaches only this process) that grades one submission after another through
``grade(..., slot=2N or 2N+1)``: its own uids and cgroups under the namespace backend, one torch
thread by default, and sandboxed workers forked from a zygote that has already imported torch. This process only schedules, watches and
writes: a slot that dies or hangs is replaced and its submission gets a ``grader`` error scorecard.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader import intake, manifest, schema
from grader.batch import cards
from grader.batch.discover import Entry
from grader.grade import launch_spec
from grader.sandbox import isolation as iso
from grader.scoring import scorecard

WATCHDOG_SLACK_S = 120.0
MAX_STARTUP_FAILURES = 3


class BatchFault(RuntimeError):
    """The engine itself cannot go on (slots cannot start): a grader fault."""


class BatchInterrupted(KeyboardInterrupt):
    """Ctrl-C: every finished scorecard is on disk; a rerun resumes."""


@dataclass
class Options:
    assignment: str = manifest.DEFAULT_ASSIGNMENT
    isolation: str = "auto"
    require_isolation: str | None = None
    jobs: int | None = None
    threads: int = 1
    force: bool = False
    exercises: list[str] | None = None
    per_test_time_limit: float | None = None
    warm: str = "fork"  # fork (zygote) | start (pre-started workers) | off (cold, for measurements)
    seed: int | None = None


@dataclass
class Result:
    entry: Entry
    card: dict[str, Any]
    wall_s: float = 0.0
    warm: bool = False
    skipped: bool = False

    @property
    def grader_error(self) -> bool:
        return self.card["status"] == "error" and (self.card["error"] or {}).get("kind") == "grader"


@dataclass
class Run:
    results: list[Result]
    backend: str
    slots: int
    wall_s: float
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def graded(self) -> list[Result]:
        return [r for r in self.results if not r.skipped]


def card_path(out: Path, key: str) -> Path:
    return out / "scorecards" / f"{key}.json"


def run(entries: list[Entry], *, out: Path, options: Options,
        on_result: Callable[[Result], None] | None = None, on_plan: Callable[[int, int], None] | None = None) -> Run:
    """Grade ``entries`` into ``out/scorecards``; return every entry's result (skipped ones read back).

    Raises ``manifest.ManifestError`` / ``iso.IsolationError`` before anything starts, :class:`BatchFault`
    when slots cannot start, :class:`BatchInterrupted` on Ctrl-C (finished scorecards stay).
    """
    t0 = time.monotonic()
    assignment = manifest.load(None, options.assignment)
    for exercise_id in options.exercises or ():
        assignment.exercise(exercise_id)
    backend = options.isolation if options.isolation == "inprocess" else iso.choose(
        options.isolation, options.require_isolation)
    (out / "scorecards").mkdir(parents=True, exist_ok=True)
    (out / "logs").mkdir(exist_ok=True)
    ids = options.exercises or assignment.ids()
    done: dict[str, Result] = {}
    todo: list[Entry] = []
    modules = {e.module for e in assignment.exercises}
    for entry in entries:
        if entry.clash:
            card = cards.error_card(assignment=assignment, spec=launch_spec(assignment, backend), path=entry.path,
                                    student=entry.student, kind="intake", message=entry.clash,
                                    exercises=options.exercises)
            done[entry.key] = _write(out, Result(entry, card), assignment, backend, options.exercises)
            continue
        old = None if options.force else cards.load(card_path(out, entry.key))
        if old is not None and cards.is_current(old, sha256=_fingerprint(entry.path, modules),
                                                assignment=assignment.id, exercise_ids=list(ids)):
            done[entry.key] = Result(entry, old, skipped=True)
        else:
            todo.append(entry)
    if on_plan:
        on_plan(len(entries), sum(r.skipped for r in done.values()))
    for result in done.values():
        if on_result:
            on_result(result)
    jobs = max(1, min(options.jobs or os.cpu_count() or 1, len(todo) or 1))
    pool = _Pool(out=out, options=options, assignment=assignment, backend=backend)
    try:
        for result in pool.grade(todo, jobs):
            done[result.entry.key] = _write(out, result, assignment, backend, options.exercises)
            if on_result:
                on_result(done[result.entry.key])
    except KeyboardInterrupt:
        pool.stop()
        raise BatchInterrupted(f"{sum(not r.skipped for r in done.values())} scorecards written") from None
    finally:
        pool.stop()
    return Run([done[e.key] for e in entries if e.key in done], backend, jobs, round(time.monotonic() - t0, 3),
               meta={"slot_starts": pool.starts, "slot_deaths": pool.deaths})


def _fingerprint(path: Path, modules: set[str]) -> str:
    try:
        sub = intake.take(path, modules=modules)
    except intake.IntakeError:
        return ""
    sub.cleanup()
    return sub.sha256


def _write(out: Path, result: Result, assignment: manifest.Assignment, backend: str,
           exercises: list[str] | None) -> Result:
    try:
        scorecard.write(result.card, card_path(out, result.entry.key))
    except schema.SchemaError as exc:
        result.card = cards.error_card(assignment=assignment, spec=launch_spec(assignment, backend),
                                       path=result.entry.path, student=result.entry.student, kind="grader",
                                       message=f"internal error: the scorecard failed its schema ({exc})",
                                       exercises=exercises)
        scorecard.write(result.card, card_path(out, result.entry.key))
    return result


class _Slot:
    def __init__(self, n: int, config: dict[str, Any], log: Path) -> None:
        self.n, self.deadline, self.ready, self.buffer = n, 0.0, False, b""
        self.started = time.monotonic()
        with open(log, "ab") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "grader.batch.slot", json.dumps(config)],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                         start_new_session=True)
        self.job: Entry | None = None

    def send(self, entry: Entry) -> bool:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write((json.dumps({"key": entry.key, "path": str(entry.path),
                                               "student": entry.student}) + "\n").encode())
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


class _Pool:
    def __init__(self, *, out: Path, options: Options, assignment: manifest.Assignment, backend: str) -> None:
        self.out, self.options, self.assignment, self.backend = out, options, assignment, backend
        self.slots: list[_Slot] = []
        self.selector = selectors.DefaultSelector()
        self.starts = self.deaths = self.startup_failures = 0
        self.watchdog = assignment.limits.submission_wall_s + WATCHDOG_SLACK_S

    def _config(self, n: int) -> dict[str, Any]:
        o = self.options
        return {"slot": n, "threads": o.threads, "assignment": o.assignment, "isolation": self.backend,
                "require_isolation": o.require_isolation, "exercises": o.exercises,
                "per_test_time_limit": o.per_test_time_limit, "warm": o.warm, "seed": o.seed}

    def _start(self, n: int) -> _Slot:
        self.starts += 1
        slot = _Slot(n, self._config(n), self.out / "logs" / f"slot-{n}.log")
        assert slot.proc.stdout is not None
        self.selector.register(slot.proc.stdout, selectors.EVENT_READ, slot)
        self.slots.append(slot)
        return slot

    def _retire(self, slot: _Slot) -> None:
        try:
            assert slot.proc.stdout is not None
            self.selector.unregister(slot.proc.stdout)
        except (KeyError, ValueError):
            pass
        slot.stop()
        self.slots.remove(slot)

    def _error(self, entry: Entry, kind: str, message: str, slot: int, seconds: float = 0.0) -> Result:
        spec = launch_spec(self.assignment, self.backend, slot=2 * slot, threads=self.options.threads)
        card = cards.error_card(assignment=self.assignment, spec=spec, path=entry.path, student=entry.student,
                                kind=kind, message=message, seconds=seconds, exercises=self.options.exercises)
        return Result(entry, card, wall_s=seconds)

    def grade(self, todo: list[Entry], jobs: int):  # noqa: ANN201 - a generator of Result
        pending = deque(todo)
        for n in range(jobs if pending else 0):
            self._start(n)
        while pending or any(s.job for s in self.slots):
            now = time.monotonic()
            for key, _ in self.selector.select(1.0):
                slot: _Slot = key.data
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
                yield from self._died(slot, pending, f"ran past the {self.watchdog:.0f} s watchdog and was stopped")
            for slot in [s for s in self.slots if not s.ready and now - s.started > 300]:
                yield from self._died(slot, pending, "did not start within 300 s")

    def _feed(self, slot: _Slot, pending: deque[Entry]) -> None:
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

    def _died(self, slot: _Slot, pending: deque[Entry], how: str):  # noqa: ANN202 - generator
        entry, n, ready = slot.job, slot.n, slot.ready
        self._retire(slot)
        self.deaths += 1
        code = slot.proc.returncode
        log = self.out / "logs" / f"slot-{n}.log"
        if entry is not None:
            seconds = time.monotonic() - (slot.deadline - self.watchdog)
            yield self._error(entry, "grader", f"the grading slot process {how} (exit status {code}) while grading "
                              f"this submission; see {log}; rerun the batch to retry it", n, seconds)
        elif not ready:
            self.startup_failures += 1
            if self.startup_failures >= MAX_STARTUP_FAILURES:
                tail = log.read_text("utf-8", "replace")[-600:] if log.exists() else ""
                raise BatchFault(f"grading slots cannot start (see {log}): {tail.strip()}")
        if pending:
            self._start(n)

    def _result(self, slot: _Slot, message: dict[str, Any]) -> Result:
        entry = slot.job
        assert entry is not None
        wall = float(message.get("wall_s", 0.0))
        if "card" in message:
            return Result(entry, message["card"], wall_s=wall, warm=bool(message.get("warm")))
        if "refused" in message:
            return self._error(entry, "isolation", message["refused"], slot.n, wall)
        return self._error(entry, "grader", f"grader fault: {message.get('fault', 'unknown')}", slot.n, wall)

    def stop(self) -> None:
        for slot in list(self.slots):
            self._retire(slot)
        self.selector.close()
