"""``grader batch --dask``: the batch engine's grading (:class:`grader.batch.engine.Grading`) on a
Dask cluster.

The engine plans as for one machine (unchanged submissions skipped, ``--force``), writes every
scorecard atomically as it arrives and keeps them on Ctrl-C; only where the grading happens changes:

- **proof** (:meth:`DaskGrading.prove`): connect (:mod:`grader.cluster.connect`), register this
  run's :class:`grader.cluster.worker.GradingPlugin` and wait for every worker's self-check, judged
  by :mod:`grader.cluster.admission`. A worker below the namespace sandbox, whose sandbox reaches
  the network, that grades with other grading inputs, or that offers a GPU it does not have, is
  refused by name (exit 2, nothing graded); one whose canary fails refuses the run (exit 3). Nothing
  to grade: no cluster at all.
- **grading** (:meth:`DaskGrading.grade`): each submission is read here
  (:func:`grader.cluster.messages.take`) and sent as plain bytes in one task; the JSON text that
  comes back is bounded, strictly parsed and checked (:func:`grader.cluster.messages.accept`) before
  the engine writes it. A task whose worker died is run again elsewhere by the scheduler
  (``distributed.scheduler.allowed-failures``); one that fails for good, or returns something
  unacceptable, becomes a ``grader`` error scorecard (a rerun retries it), never lost points. One
  result per student: the first valid one.
"""

from __future__ import annotations

import functools
import os
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from distributed import Client, Future, as_completed

from grader import safetext
from grader.batch import cards, pool
from grader.batch.results import Options, Result
from grader.cardtypes import ErrorKind, error_of
from grader.cluster import admission, shard_job
from grader.cluster import messages as wire
from grader.cluster.connect import Session, Target
from grader.cluster.worker import GradingPlugin, grade_task
from grader.course import manifest
from grader.errors import GraderFault
from grader.exports import lastrun
from grader.intake import submission as intake
from grader.intake.classfolder import Entry
from grader.options import launch_spec
from grader.sandbox.levels import BackendName


class DaskGrading:
    """Grading on the Dask cluster ``target`` (``gpu``: only on workers that offer the ``GPU``
    resource)."""

    backend: BackendName = wire.REQUIRED_LEVEL

    def __init__(
        self,
        *,
        out: Path,
        options: Options,
        assignment: manifest.Assignment,
        target: Target,
        gpu: bool = False,
        say: Callable[[str], None] | None = None,
    ) -> None:
        self.out, self.options, self.assignment, self.target, self.gpu = (
            out,
            options,
            assignment,
            target,
            gpu,
        )
        self.say = say or (lambda line: None)
        # this run's plugin: runs sharing a cluster stay apart
        self.name = f"attention-grader-{secrets.token_hex(6)}"
        self.session: Session | None = None
        self.records: dict[str, dict[str, Any]] = {}
        self.slots, self.rejected = 1, 0
        self.sent: dict[Future[str], tuple[Entry, wire.Payload]] = {}
        self.graded_by: dict[str, str] = {}  # student key -> the worker that sent its result
        self.payloads: dict[
            str, wire.Payload | tuple[ErrorKind, str]
        ] = {}  # student key -> what is sent, or (error kind, why not)

    # -- the proof ----------------------------------------------------------------------------
    def prove(self, pending: list[Entry]) -> dict[str, Any] | None:
        self.read(pending)
        if not any(isinstance(p, wire.Payload) for p in self.payloads.values()):
            # nothing a worker could grade (every submission unchanged or unreadable): no cluster,
            # and the canary of the run that graded what is kept
            kept = (lastrun.read_summary(self.out / "summary.json") or {}).get("canary")
            return kept if wire.is_canary(kept) else None
        self.say(
            "starting or joining the Dask cluster; every worker then checks itself (sandbox level, network, "
            "canary, fingerprint) before anyone is graded…"
        )
        try:
            self.session = Session(self.target)
            client = self.session.client
            admission.joined(client, gpu=self.gpu)
            client.register_plugin(GradingPlugin(self.config()), name=self.name)
            self.records = admission.preflight(
                client,
                self.name,
                fingerprint=self.config()["fingerprint"],
                gpu=self.gpu,
                canary_required=self.options.canary,
            )
        except BaseException:
            self.stop()
            raise
        self.slots = max(1, sum(int(r.get("nthreads", 1)) for r in self.records.values()))
        first = self.records[min(self.records)]
        return first.get("canary") if self.options.canary else None

    def config(self) -> dict[str, Any]:
        """What every worker's plugin is told: plain data."""
        a, o = self.assignment, self.options
        slot = {
            **pool.slot_config(0, options=o, assignment=a, backend=self.backend),
            "require_isolation": self.backend,
        }
        probe = {
            "assignment": a.id,
            "manifest": os.path.abspath(a.manifest),
            "exercises": o.exercises,
            "per_test_time_limit": o.per_test_time_limit,
            "canary": o.canary,
        }
        return {
            "slot": slot,
            "probe": probe,
            "fingerprint": shard_job.fingerprint(a),
            "gpu": self.gpu,
            "watchdog_s": a.limits.submission_wall_s + pool.WATCHDOG_SLACK_S,
        }

    def read(self, entries: list[Entry]) -> None:
        """Each submission as its payload, read here (or why it cannot be read): before any cluster
        is asked."""
        modules = {e.module for e in self.assignment.exercises}
        for entry in entries:
            if entry.key not in self.payloads:
                try:
                    self.payloads[entry.key] = wire.take(entry.path, modules=modules)
                except intake.IntakeError as exc:
                    self.payloads[entry.key] = ("intake", str(exc))
                except (
                    GraderFault
                ) as exc:  # reading it failed for a reason of this machine's, not the submission's
                    self.payloads[entry.key] = ("grader", f"{exc}; rerun the batch to retry it")

    # -- the grading --------------------------------------------------------------------------
    def grade(self, todo: list[Entry]) -> Iterator[Result]:
        self.read(todo)
        unreadable = [(e, p) for e in todo if isinstance(p := self.payloads[e.key], tuple)]
        if self.session is not None:
            self._submit(
                self.session.client,
                [e for e in todo if isinstance(self.payloads[e.key], wire.Payload)],
            )
        return self._collect(unreadable)

    def _submit(self, client: Client, readable: list[Entry]) -> None:
        """One task per readable submission, its payload sent as plain bytes."""
        resources = {"GPU": 1} if self.gpu else None
        for entry in readable:
            payload = self.payloads[entry.key]
            assert isinstance(payload, wire.Payload)
            future = client.submit(
                grade_task,
                self.name,
                entry.key,
                entry.student,
                payload.plain(),
                key=f"{self.name}-{entry.key}",
                pure=False,
                resources=resources,
            )
            self.sent[future] = (entry, payload)

    def _collect(self, unreadable: list[tuple[Entry, tuple[ErrorKind, str]]]) -> Iterator[Result]:
        seen: set[str] = set()
        for future in as_completed(list(self.sent)) if self.sent else ():
            entry, payload = self.sent.pop(future)
            if entry.key in seen:
                continue  # one scorecard per student: the first valid result won
            seen.add(entry.key)
            result = self.result(future, entry, payload)
            result.recorded = functools.partial(self._log, entry, future.key, result)
            yield result
        # last: their cards are made here, and the first one imports torch (a second or two) while
        # nobody waits
        yield from (self._error(entry, kind, message) for entry, (kind, message) in unreadable)

    def result(self, future: Future[str], entry: Entry, payload: wire.Payload) -> Result:
        """The engine's result for a finished task: its checked scorecard, or a grader error
        card."""
        if future.status != "finished":
            exc = future.exception()
            return self._error(
                entry,
                "grader",
                f"the Dask task grading this submission failed ({type(exc).__name__}: "
                f"{safetext.name(exc, 400)}); rerun the batch to retry it",
            )
        return self.accept(future.result(), entry, payload)

    def accept(self, text: object, entry: Entry, payload: wire.Payload) -> Result:
        """A task's reply turned into the engine's result (a rejected one into a grader error
        card)."""
        try:
            reply = wire.accept(
                text,
                key=entry.key,
                sha256=payload.sha256,
                assignment=self.assignment.id,
                exercises=self.options.exercises or self.assignment.ids(),
            )
        except wire.ResultRejected as exc:
            self.rejected += 1
            return self._error(
                entry,
                "grader",
                f"the result from the Dask cluster was rejected: {exc}; rerun the "
                "batch to retry it",
            )
        wall = float(reply.get("wall_s", 0.0))
        self.graded_by[entry.key] = str(reply.get("worker", "-"))
        if "refused" in reply:
            return self._error(entry, "isolation", reply["refused"], wall)
        if "fault" in reply:
            return self._error(
                entry, "grader", f"grader fault on the Dask cluster: {reply['fault']}", wall
            )
        card = reply["card"]
        # as this machine's slots record it: the path given (absolute) and the layout as read here,
        # not the worker's copy; the canary of the worker that graded it
        card["submission"].update(
            path=safetext.name(os.path.abspath(entry.path), 1000), layout=payload.layout
        )
        proof = self.records.get(str(reply.get("worker")), {}).get("canary") or reply.get("canary")
        if self.options.canary and proof:
            card["canary"] = proof
        return Result(entry, card, wall_s=wall, warm=bool(reply.get("warm")))

    def _error(self, entry: Entry, kind: ErrorKind, message: str, seconds: float = 0.0) -> Result:
        launch = launch_spec(self.assignment, self.backend, threads=self.options.threads)
        card = cards.error_card(
            assignment=self.assignment,
            launch=launch,
            path=Path(os.path.abspath(entry.path)),
            student=entry.student,
            kind=kind,
            message=message,
            seconds=seconds,
            exercises=self.options.exercises,
        )
        card["seed"] = self.options.seed if self.options.seed is not None else 0
        return Result(entry, card, wall_s=seconds)

    def _log(self, entry: Entry, task: object, result: Result) -> None:
        """One line per card written, in ``logs/dask.log``: which worker graded it (or why not)."""
        card = result.card
        what = (
            f"{card['score']:g}/{card['max_score']:g}"
            if card["status"] == "graded"
            else f"error ({error_of(card)['kind']})"
        )
        line = (
            f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {entry.key} task={task} worker={self.graded_by.get(entry.key, '-')} "
            f"{what} {result.wall_s:.2f}s\n"
        )
        with open(self.out / "logs" / "dask.log", "a", encoding="utf-8") as log:
            log.write(line)

    # -- the end ------------------------------------------------------------------------------
    def stop(self) -> None:
        if self.session is None:
            return
        session, self.session = self.session, None
        try:
            session.client.cancel(list(self.sent), force=True)
            if (
                session.cluster is None
            ):  # a cluster that stays: each worker stops this run's slots and sandboxes
                session.client.unregister_worker_plugin(
                    self.name
                )  # (local:N's workers do as they close)
        except Exception:  # noqa: BLE001 - best effort: a cluster that is gone has nothing left to stop
            pass
        session.close()

    def figures(self) -> dict[str, Any]:
        return {
            "slot_starts": self.slots if self.records else 0,
            "slot_deaths": 0,
            "timing": {"dask_workers": len(self.records), "dask_rejected_results": self.rejected},
        }
