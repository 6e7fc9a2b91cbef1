"""The batch engine: resumable, one scorecard written atomically as soon as it is ready.

It decides what to grade (a rerun skips submissions whose content, assignment and exercise set are
unchanged and whose scorecard records what decides a grade as it is now: :mod:`grader.fingerprint`),
hands the rest to a :class:`Grading` and writes what comes back. By default that is
:class:`LocalGrading`: the :class:`grader.batch.pool.Pool` of slots on this machine (each a
long-lived trusted process in its own session, with its own uids and cgroups under the namespace
backend and sandboxed workers forked from a zygote that has already imported torch), proven by the
canary here first. ``grader batch --dask`` hands the same plan to a Dask cluster
(:mod:`grader.cluster.grading`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from grader import canary, fingerprint, schema
from grader.batch import cards
from grader.batch.cards import card_path
from grader.batch.pool import Pool
from grader.batch.results import BatchFault, BatchInterrupted, Options, Result, Run, uninterrupted
from grader.course import manifest
from grader.errors import GraderFault
from grader.intake import submission as intake
from grader.intake.classfolder import Entry
from grader.options import launch_spec
from grader.sandbox import choice
from grader.sandbox.levels import BackendName
from grader.scoring import scorecard

__all__ = [
    "BatchFault",
    "BatchInterrupted",
    "Grading",
    "GradingFactory",
    "LocalGrading",
    "Options",
    "Result",
    "Run",
    "card_path",
    "run",
]


class Grading(Protocol):
    """Where the submissions the engine could not skip are graded, and the proof that it grades
    correctly."""

    backend: BackendName  # the sandbox level every submission is graded under
    slots: int  # how many submissions are graded at once (known once ``grade`` was called)

    def prove(self, pending: list[Entry]) -> dict[str, Any] | None:
        """The canary's record, before any student is graded (``pending``: what will be graded)."""

    def grade(self, todo: list[Entry]) -> Iterator[Result]:
        """One result per entry of ``todo``, in any order, as each is ready."""

    def stop(self) -> None:
        """Stop whatever still runs (idempotent; Ctrl-C calls it mid-way)."""

    def figures(self) -> dict[str, Any]:
        """What the run measured of itself (``slot_starts``, ``slot_deaths``, ...), for
        ``Run.meta``."""


class GradingFactory(Protocol):
    def __call__(
        self,
        *,
        out: Path,
        options: Options,
        assignment: manifest.Assignment,
        say: Callable[[str], None] | None = None,
    ) -> Grading: ...


def _quiet(line: str) -> None:
    """Where nobody listens for what a run is doing."""


class LocalGrading:
    """This machine: the canary proven here, then the slots of :class:`grader.batch.pool.Pool`."""

    def __init__(
        self,
        *,
        out: Path,
        options: Options,
        assignment: manifest.Assignment,
        say: Callable[[str], None] | None = None,
    ) -> None:
        self.out, self.options, self.assignment, self.say = out, options, assignment, say or _quiet
        self.backend = choice.choose(options.isolation, options.require_isolation)
        self.pool: Pool | None = None
        self.slots = 1

    def prove(self, pending: list[Entry]) -> dict[str, Any] | None:
        o = self.options
        attested = canary.attest(
            self.assignment,
            backend=self.backend,
            exercises=o.exercises,
            per_test_time_limit=o.per_test_time_limit,
            enabled=o.canary,
            fork=o.warm == "fork",
            say=self.say,
        )  # even when nothing is pending
        if attested.zygote is not None:
            attested.zygote.close()  # the pool's slots connect to it next
        return attested.record

    def grade(self, todo: list[Entry]) -> Iterator[Result]:
        self.slots = max(1, min(self.options.jobs or os.cpu_count() or 1, len(todo) or 1))
        if todo:
            self.say(
                f"starting {self.slots} grading slot(s) for {len(todo)} submission(s) under `{self.backend}` "
                "isolation (their sandboxed workers come from a zygote that imports torch once)…"
            )
        self.pool = Pool(
            out=self.out, options=self.options, assignment=self.assignment, backend=self.backend
        )
        return self.pool.grade(todo, self.slots)

    def stop(self) -> None:
        if self.pool is not None:
            self.pool.stop()

    def figures(self) -> dict[str, Any]:
        return {
            "slot_starts": self.pool.starts if self.pool else 0,
            "slot_deaths": self.pool.deaths if self.pool else 0,
        }


def run(
    entries: list[Entry],
    *,
    out: Path,
    options: Options,
    assignment: manifest.Assignment | None = None,
    on_result: Callable[[Result], None] | None = None,
    on_plan: Callable[[int, int, dict[str, int]], None] | None = None,
    grading: GradingFactory | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> Run:
    """Grade ``entries`` into ``out/scorecards``; return every entry's result (skipped ones read
    back).

    ``assignment`` is the one the command loaded (default: ``options.load()``); ``grading`` says
    where (default: :class:`LocalGrading`); ``on_phase`` hears what is happening between results
    (the canary's proof, slots starting), one line each. Raises ``manifest.ManifestError`` /
    ``choice.IsolationError`` before anything starts, :class:`BatchFault` when slots cannot start,
    :class:`BatchInterrupted` on Ctrl-C (finished scorecards stay).
    """
    t0 = time.monotonic()
    assignment = assignment or options.load()
    for exercise_id in options.exercises or ():
        assignment.exercise(exercise_id)
    where = (grading or LocalGrading)(out=out, options=options, assignment=assignment, say=on_phase)
    kept, todo, stale = _plan(entries, out, options, assignment, where.backend)
    proof = where.prove(todo) if entries else None  # before any student is graded
    (out / "scorecards").mkdir(parents=True, exist_ok=True)
    (out / "logs").mkdir(exist_ok=True)
    done: dict[str, Result] = {}
    for (
        entry
    ) in entries:  # the class's order: clashes and unchanged submissions first, as they come
        if entry.clash:
            card = cards.error_card(
                assignment=assignment,
                launch=launch_spec(assignment, where.backend),
                path=entry.path,
                student=entry.student,
                kind="intake",
                message=entry.clash,
                exercises=options.exercises,
            )
            done[entry.key] = _write(
                out, Result(entry, card), assignment, where.backend, options.exercises, proof
            )
        elif entry.key in kept:
            done[entry.key] = kept[entry.key]
    if on_plan:
        on_plan(len(entries), len(kept), stale)
    for result in done.values():
        _deliver(result, on_result)
    try:
        for result in where.grade(todo):
            with uninterrupted():
                done[result.entry.key] = _write(
                    out, result, assignment, where.backend, options.exercises, proof
                )
                if result.recorded is not None:
                    result.recorded()
            _deliver(done[result.entry.key], on_result)
    except KeyboardInterrupt:
        where.stop()
        raise BatchInterrupted(
            f"{sum(not r.skipped for r in done.values())} scorecards written"
        ) from None
    finally:
        where.stop()
    return Run(
        [done[e.key] for e in entries if e.key in done],
        where.backend,
        where.slots,
        round(time.monotonic() - t0, 3),
        meta={**where.figures(), "canary": proof},
    )


def _deliver(result: Result, on_result: Callable[[Result], None] | None) -> None:
    """``on_result`` hears the whole card; the run keeps only its slim form (the whole one is on
    disk)."""
    if on_result:
        on_result(result)
    result.card = scorecard.slim(result.card)


def _plan(
    entries: list[Entry],
    out: Path,
    options: Options,
    assignment: manifest.Assignment,
    backend: BackendName,
) -> tuple[dict[str, Result], list[Entry], dict[str, int]]:
    """The unchanged submissions' results (read back), the entries to grade (clashes are in
    neither), and how many earlier scorecards are graded again, by their reasons (``+``-joined keys
    of :data:`grader.batch.cards.REASONS`)."""
    ids = options.exercises or assignment.ids()
    modules = {e.module for e in assignment.exercises}
    grading = fingerprint.record(
        assignment,
        backend=backend,
        require_cuda=options.require_cuda,
        per_test_time_limit=options.per_test_time_limit,
    )
    kept: dict[str, Result] = {}
    todo: list[Entry] = []
    stale: dict[str, int] = {}
    for entry in (e for e in entries if not e.clash):
        old = cards.load(card_path(out, entry.key))
        why = (
            ["force"]
            if options.force and old is not None
            else cards.stale(
                old,
                sha256=_fingerprint(entry.path, modules),
                assignment=assignment.id,
                exercise_ids=list(ids),
                grading=grading,
            )
        )
        if not why and old is not None:
            kept[entry.key] = Result(entry, scorecard.slim(old), skipped=True)
            continue
        todo.append(entry)
        if old is not None:
            stale["+".join(why)] = stale.get("+".join(why), 0) + 1
    return kept, todo, stale


def _fingerprint(path: Path, modules: set[str]) -> str:
    try:
        sub = intake.take(path, modules=modules)
    except (intake.IntakeError, GraderFault):  # unreadable now: graded again, and its card says why
        return ""
    sub.cleanup()
    return sub.sha256


def _write(
    out: Path,
    result: Result,
    assignment: manifest.Assignment,
    backend: BackendName,
    exercises: list[str] | None,
    proof: dict[str, Any] | None = None,
) -> Result:
    if proof is not None:  # a cluster's result already names the canary of the host that graded it
        result.card.setdefault("canary", proof)
    try:
        scorecard.write(result.card, card_path(out, result.entry.key))
    except schema.SchemaError as exc:
        result.card = cards.error_card(
            assignment=assignment,
            launch=launch_spec(assignment, backend),
            path=result.entry.path,
            student=result.entry.student,
            kind="grader",
            message=f"internal error: the scorecard failed its schema ({exc})",
            exercises=exercises,
        )
        scorecard.write(result.card, card_path(out, result.entry.key))
    return result
