"""Grade one submission against the hidden suites: intake → isolate → run → score → scorecard.

``grade()`` never raises for anything a submission does: a bad archive, a crash or a timeout all
end in a valid scorecard (``status: error`` only when the *grader* could not grade). It raises
:class:`GradeRefused` only for the caller's own mistakes (unknown assignment, isolation refused).
"""

from __future__ import annotations

import dataclasses
import secrets
import time
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, Unpack

import pytest

from grader import fingerprint, proofs
from grader.cardtypes import ErrorKind, Scorecard
from grader.course import manifest
from grader.errors import GraderFault, UsageError
from grader.intake import submission as intake
from grader.options import GradeOptions, launch_spec
from grader.sandbox import choice
from grader.sandbox import isolation as iso
from grader.sandbox.levels import BackendName
from grader.scoring import runner, scorecard, withhold
from grader.scoring.points import exercise_scores
from grader.scoring.runner import run_suites

if TYPE_CHECKING:  # imported where used: the in-process path never loads the sandbox client
    from grader.sandbox.remote import SandboxBackend, SandboxRecord
    from grader.sandbox.starters import WorkerStarter
    from grader.student.inprocess import InProcessBackend
    from grader.student.proxy import Backend


class GradeRefused(UsageError):
    """The grade cannot start (bad assignment, isolation below the required level)."""


class OptionChanges(TypedDict, total=False):
    """``grade(sub, isolation="process", seed=1)``: short for ``options=GradeOptions(isolation=...,
    seed=...)``."""

    isolation: str
    require_isolation: str | None
    seed: int | None
    require_cuda: bool
    threads: int
    exercises: list[str] | None
    per_test_time_limit: float | None


def grade(
    submission: Path | str,
    *,
    options: GradeOptions | None = None,
    assignment: manifest.Assignment | None = None,
    starter: WorkerStarter | None = None,
    student_id: str | None = None,
    **changes: Unpack[OptionChanges],
) -> Scorecard:
    """Return a schema-valid scorecard for ``submission``.

    ``assignment`` is the loaded assignment (default: ``options.load()``); ``starter`` starts the
    sandboxed workers (:mod:`grader.sandbox.starters`: cold by default, a pre-started worker, or
    forks of a zygote) and gives their launch slot; keyword ``changes`` override fields of
    ``options``.
    """
    options, starter = _resolve(options or GradeOptions(), starter, changes)
    started, t0 = scorecard.now(), time.monotonic()
    try:
        spec_assignment = assignment or options.load()
        backend = choice.choose(options.isolation, options.require_isolation)
        for exercise_id in options.exercises or ():
            spec_assignment.exercise(exercise_id)
    except (manifest.ManifestError, choice.IsolationError) as exc:
        raise GradeRefused(str(exc)) from None
    seed = secrets.randbelow(2**31) if options.seed is None else options.seed
    launch = launch_spec(
        spec_assignment, backend, slot=starter.slot if starter else 0, threads=options.threads
    )
    try:
        _check_view(launch, spec_assignment)
    except choice.IsolationError as exc:
        raise GradeRefused(str(exc)) from None
    card = _skeleton(
        spec_assignment, submission, seed, launch, backend, started, student_id, options.exercises
    )
    # what decides this grade: a rerun regrades what it no longer is
    card["grader"]["fingerprint"] = fingerprint.record(
        spec_assignment,
        backend=backend,
        require_cuda=options.require_cuda,
        per_test_time_limit=options.per_test_time_limit,
    )
    try:
        sub = intake.take(submission, modules={e.module for e in spec_assignment.exercises})
    except intake.IntakeError as exc:
        return _finish(card, t0, error=("intake", str(exc)))
    except GraderFault as exc:
        # the submission could not be read for a reason of this machine's: a rerun retries it
        return _finish(card, t0, error=("grader", f"{type(exc).__name__}: {exc}"))
    card["submission"].update({"sha256": sub.sha256, "layout": sub.layout, "files": sub.files})
    card["timings"]["intake_s"] = round(time.monotonic() - t0, 4)
    try:
        _run(
            card,
            sub,
            spec_assignment,
            _Makers(sub, spec_assignment, launch, backend, options, starter),
            seed,
            options,
        )
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - a grader fault becomes an error scorecard, never a crash
        return _finish(card, t0, error=("grader", f"{type(exc).__name__}: {exc}"))
    finally:
        sub.cleanup()
    return _finish(card, t0)


def _check_view(launch: iso.LaunchSpec, assignment: manifest.Assignment) -> None:
    """A leased uid with no view of its own must be able to read what the worker needs; and where
    only file permissions stand between it and the secrets, they must hold."""
    missing = launch.unreadable()
    if missing:
        raise choice.IsolationError(
            f"refusing to grade under `{launch.backend}` isolation as root: the sandbox's unprivileged uid cannot read "
            f"{', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''} (a folder above it is closed to other users, "
            "as a 0700 home is). Install Python and the grader's environment where every user may read them (a venv "
            "in /opt made from /usr/bin/python3, say), or grade under `namespace`, which binds them in"
        )
    if launch.backend == "process" and launch.drops_uid and launch.file_view == "permissions":
        from grader.sandbox import exposure

        exposure.check(assignment, launch.uid)


def _resolve(
    options: GradeOptions, starter: WorkerStarter | None, changes: OptionChanges
) -> tuple[GradeOptions, WorkerStarter | None]:
    """Apply ``grade()``'s keyword shorthands for option fields."""
    # every key of OptionChanges is a field of GradeOptions (a test pins it)
    return (dataclasses.replace(options, **changes) if changes else options), starter


class _Makers:
    """The suites' backend factory: makes each backend on demand and keeps the first, whose record
    (a grader fault, the sandbox's incidents and worker starts) the scorecard then reads."""

    def __init__(
        self,
        sub: intake.Submission,
        assignment: manifest.Assignment,
        launch: iso.LaunchSpec,
        backend: BackendName,
        options: GradeOptions,
        starter: WorkerStarter | None,
    ) -> None:
        self.sub, self.assignment, self.launch, self.backend = sub, assignment, launch, backend
        self.options, self.starter = options, starter
        self.sandbox: SandboxBackend | None = None
        self.made = False

    def __call__(self) -> Backend:
        made = self._inprocess() if self.backend == "inprocess" else self._sandbox()
        self.made = True
        return made

    def _inprocess(self) -> InProcessBackend:
        from grader.student.inprocess import InProcessBackend

        return InProcessBackend(
            self.sub.box,
            bans=self.assignment.bans(),
            single_module=self.sub.single_module,
            time_limits=self.assignment.time_limits(self.options.per_test_time_limit),
        )

    def _sandbox(self) -> SandboxBackend:
        from grader.sandbox.remote import SandboxBackend

        a = self.assignment
        time_limits, tests = proofs.for_grade(a, self.options, self.backend)
        made = SandboxBackend(
            self.sub.box,
            self.launch,
            bans=a.bans(),
            single_module=self.sub.single_module,
            time_limits=time_limits,
            budget_s=a.limits.submission_wall_s,
            starter=self.starter,
            test_limits=tests.full,
            tight_limits=tests.tight,
            until_first_timeout=self.options.proof_pending,
        )
        if not self.made:
            self.sandbox = made
        return made


def _run(
    card: Scorecard,
    sub: intake.Submission,
    assignment: manifest.Assignment,
    makers: _Makers,
    seed: int,
    options: GradeOptions,
) -> None:
    exercises, require_cuda = options.exercises, options.require_cuda
    chosen = (
        [assignment.exercise(e) for e in exercises] if exercises else list(assignment.exercises)
    )
    # static (nothing runs); made beside the tests where the options ask for it
    rev = withhold.begin(sub.box, assignment, sub.single_module, beside=options.review_beside)
    with rev:
        t = time.monotonic()
        files = [assignment.root / e.hidden_tests for e in chosen]
        threads = None if makers.backend == "inprocess" else runner.SANDBOXED_TRUSTED_THREADS
        results, code = run_suites(
            files, seed=seed, backend_factory=makers, assignment=assignment, trusted_threads=threads
        )
        if code == pytest.ExitCode.INTERRUPTED:
            raise KeyboardInterrupt
        if makers.sandbox is not None and makers.sandbox.grader_fault is not None:
            # pytest saw only failed tests: the fault is the grader's, not the student's
            raise makers.sandbox.grader_fault
        card["timings"]["tests_s"] = round(time.monotonic() - t, 4)
        verdict = rev.verdict()
    ids = {e.id for e in chosen}
    scores = [
        s for s in exercise_scores(results, assignment, require_cuda=require_cuda) if s.id in ids
    ]
    withhold.apply(scores, verdict)
    scorecard.scored(card, scores, require_cuda=require_cuda)
    # `integrity` findings, per-exercise `withheld`, the total without them
    withhold.annotate(card, verdict)
    # from the record made before grading: asking the spec again would re-create the groups just
    # removed
    card["isolation"]["memory_figure"] = (
        "cgroup" if card["isolation"]["cgroup"] != "none" else "in-process"
    )
    if makers.sandbox is not None:
        _sandbox_record(card, makers.sandbox.record())


def _sandbox_record(card: Scorecard, record: SandboxRecord) -> None:
    card["incidents"] = [{**i, "message": scorecard.clean(i["message"])} for i in record.incidents]
    card["student_output"] = {
        "stdout_bytes": record.stdout_bytes,
        "stderr_bytes": record.stderr_bytes,
    }
    for test in (t for e in card["exercises"] for t in e["tests"] if t["id"] in record.test_cpu):
        test["cpu_s"] = record.test_cpu[test["id"]]
    card["isolation"]["worker_starts"] = record.worker_starts
    card["isolation"]["worker_forks"] = record.worker_forks
    if record.observed is not None:  # what /proc showed of the first worker, not what was asked for
        card["isolation"].update(record.observed)


def _skeleton(
    assignment: manifest.Assignment,
    submission: Path | str,
    seed: int,
    launch: iso.LaunchSpec,
    backend: BackendName,
    started: str,
    student_id: str | None,
    exercises: list[str] | None,
) -> Scorecard:
    isolation = launch.describe()
    if backend == "inprocess":  # nothing isolated: the card says so, whatever was asked for
        isolation = {
            **isolation,
            "backend": "inprocess",
            "cgroup": "none",
            "file_view": "inprocess",
        }
    # an intake error's card is out of what was to be graded
    chosen = set(exercises or assignment.ids())
    max_score = sum(e.points for e in assignment.exercises if e.id in chosen)
    return scorecard.new(
        assignment=assignment.id,
        max_score=max_score,
        path=submission,
        isolation=isolation,
        seed=seed,
        student=student_id,
        started=started,
    )


def _finish(card: Scorecard, t0: float, *, error: tuple[ErrorKind, str] | None = None) -> Scorecard:
    if error is not None:
        scorecard.with_error(card, *error)
    return scorecard.finished(card, seconds=time.monotonic() - t0)
