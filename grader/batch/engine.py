"""The batch engine: resumable, one scorecard written atomically as soon as it is ready.

It decides what to grade (a rerun skips submissions whose content, assignment and grader version
are unchanged), hands the rest to the :class:`grader.batch.pool.Pool` of slots (each a long-lived
trusted process in its own session, with its own uids and cgroups under the namespace backend and
sandboxed workers forked from a zygote that has already imported torch), and writes what comes back.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grader import canary, intake, manifest, schema
from grader.batch import cards
from grader.batch.discover import Entry
from grader.batch.pool import Pool
from grader.batch.results import BatchFault, BatchInterrupted, Options, Result, Run
from grader.options import launch_spec
from grader.sandbox import isolation as iso
from grader.scoring import scorecard

__all__ = ["BatchFault", "BatchInterrupted", "Options", "Result", "Run", "card_path", "run"]


def card_path(out: Path, key: str) -> Path:
    return out / "scorecards" / f"{key}.json"


def run(entries: list[Entry], *, out: Path, options: Options, assignment: manifest.Assignment | None = None,
        on_result: Callable[[Result], None] | None = None, on_plan: Callable[[int, int], None] | None = None) -> Run:
    """Grade ``entries`` into ``out/scorecards``; return every entry's result (skipped ones read back).

    ``assignment`` is the one the command loaded (default: ``options.load()``). Raises
    ``manifest.ManifestError`` / ``iso.IsolationError`` before anything starts, :class:`BatchFault`
    when slots cannot start, :class:`BatchInterrupted` on Ctrl-C (finished scorecards stay).
    """
    t0 = time.monotonic()
    assignment = assignment or options.load()
    for exercise_id in options.exercises or ():
        assignment.exercise(exercise_id)
    backend = iso.choose(options.isolation, options.require_isolation)
    proof = _canary(assignment, backend, options) if entries else None  # before any student is graded
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
            done[entry.key] = _write(out, Result(entry, card), assignment, backend, options.exercises, proof)
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
    pool = Pool(out=out, options=options, assignment=assignment, backend=backend)
    try:
        for result in pool.grade(todo, jobs):
            done[result.entry.key] = _write(out, result, assignment, backend, options.exercises, proof)
            if on_result:
                on_result(done[result.entry.key])
    except KeyboardInterrupt:
        pool.stop()
        raise BatchInterrupted(f"{sum(not r.skipped for r in done.values())} scorecards written") from None
    finally:
        pool.stop()
    return Run([done[e.key] for e in entries if e.key in done], backend, jobs, round(time.monotonic() - t0, 3),
               meta={"slot_starts": pool.starts, "slot_deaths": pool.deaths, "canary": proof})


def _fingerprint(path: Path, modules: set[str]) -> str:
    try:
        sub = intake.take(path, modules=modules)
    except intake.IntakeError:
        return ""
    sub.cleanup()
    return sub.sha256


def _canary(assignment: manifest.Assignment, backend: str, options: Options) -> dict[str, Any] | None:
    """The proof that this machine grades correctly (:mod:`grader.canary`); raises ``CanaryFailed``."""
    if not options.canary:
        return None
    return canary.prove(assignment, backend=backend, exercises=options.exercises,
                        per_test_time_limit=options.per_test_time_limit).record()


def _write(out: Path, result: Result, assignment: manifest.Assignment, backend: str,
           exercises: list[str] | None, proof: dict[str, Any] | None = None) -> Result:
    if proof is not None:
        result.card["canary"] = proof
    try:
        scorecard.write(result.card, card_path(out, result.entry.key))
    except schema.SchemaError as exc:
        result.card = cards.error_card(assignment=assignment, spec=launch_spec(assignment, backend),
                                       path=result.entry.path, student=result.entry.student, kind="grader",
                                       message=f"internal error: the scorecard failed its schema ({exc})",
                                       exercises=exercises)
        scorecard.write(result.card, card_path(out, result.entry.key))
    return result
