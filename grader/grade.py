"""Grade one submission against the hidden suites: intake → isolate → run → score → scorecard.

``grade()`` never raises for anything a submission does: a bad archive, a crash or a timeout all
end in a valid scorecard (``status: error`` only when the *grader* could not grade). It raises
:class:`GradeRefused` only for the caller's own mistakes (unknown assignment, isolation refused).
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

from grader import intake, manifest
from grader.errors import UsageError
from grader.sandbox import isolation as iso
from grader.scoring import scorecard, withhold
from grader.scoring.points import exercise_scores
from grader.scoring.runner import run_suites

if TYPE_CHECKING:  # imported where used: the in-process path never loads the sandbox client
    from grader.sandbox.remote import SandboxBackend, WarmChannel
    from grader.sandbox.zygote_client import Zygote
    from grader.student.inprocess import InProcessBackend
    from grader.student.proxy import Backend


class GradeRefused(UsageError):
    """The grade cannot start (bad assignment, isolation below the required level)."""


def grade(submission: Path | str, *, assignment: str = manifest.DEFAULT_ASSIGNMENT,
          manifest_path: Path | None = None, isolation: str = "auto", require_isolation: str | None = None,
          seed: int | None = None, require_cuda: bool = False, slot: int = 0, threads: int = 1,
          student_id: str | None = None, exercises: list[str] | None = None,
          per_test_time_limit: float | None = None, warm: WarmChannel | None = None,
          zygote: Zygote | None = None) -> dict[str, Any]:
    """Return a schema-valid scorecard for ``submission``.

    ``exercises`` restricts grading to some exercise ids; ``per_test_time_limit`` overrides the
    manifest's limits (both for quick checks and tests). ``warm`` is an optional pre-started
    :class:`grader.sandbox.remote.WarmChannel` (same launch spec) used for the first worker; ``zygote``
    a :class:`grader.sandbox.zygote_client.Zygote` that forks every worker with torch already imported.
    """
    started, t0 = scorecard.now(), time.monotonic()
    try:
        spec_assignment = manifest.load(manifest_path, assignment)
        backend = iso.choose(isolation, require_isolation)
        for exercise_id in exercises or ():
            spec_assignment.exercise(exercise_id)
    except (manifest.ManifestError, iso.IsolationError) as exc:
        raise GradeRefused(str(exc)) from None
    seed = secrets.randbelow(2**31) if seed is None else seed
    spec = launch_spec(spec_assignment, backend, slot=slot, threads=threads)
    card = _skeleton(spec_assignment, submission, seed, spec, backend, started, student_id, exercises)
    try:
        sub = intake.take(submission, modules={e.module for e in spec_assignment.exercises})
    except intake.IntakeError as exc:
        return _finish(card, t0, error=("intake", str(exc)))
    card["submission"].update(sha256=sub.sha256, layout=sub.layout, files=sub.files)
    card["timings"]["intake_s"] = round(time.monotonic() - t0, 4)
    try:
        _run(card, sub, spec_assignment, spec, backend, seed, require_cuda,
             exercises=exercises, per_test_time_limit=per_test_time_limit, warm=warm, zygote=zygote)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - a grader fault becomes an error scorecard, never a crash
        return _finish(card, t0, error=("grader", f"{type(exc).__name__}: {exc}"))
    finally:
        sub.cleanup()
    return _finish(card, t0)


def _run(card: dict[str, Any], sub: intake.Submission, assignment: manifest.Assignment, spec: iso.LaunchSpec,
         backend: str, seed: int, require_cuda: bool, *, exercises: list[str] | None,
         per_test_time_limit: float | None, warm: WarmChannel | None = None, zygote: Zygote | None = None) -> None:
    made: list[InProcessBackend | SandboxBackend] = []
    chosen = [assignment.exercise(e) for e in exercises] if exercises else list(assignment.exercises)
    limits = {e.id: per_test_time_limit or e.time_limit_s for e in assignment.exercises}

    def factory() -> Backend:
        if backend == "inprocess":
            from grader.student.inprocess import InProcessBackend

            made.append(InProcessBackend(sub.box, bans=assignment.bans(), single_module=sub.single_module))
        else:
            from grader.sandbox.remote import SandboxBackend

            made.append(SandboxBackend(sub.box, spec, bans=assignment.bans(), single_module=sub.single_module,
                                       time_limits=limits,
                                       budget_s=assignment.limits.submission_wall_s, warm=warm,
                                       zygote=zygote))
        return made[-1]

    verdict = withhold.review(sub.box, assignment, sub.single_module)  # static: before any of it runs
    t = time.monotonic()
    files = [assignment.root / e.hidden_tests for e in chosen]
    results, code = run_suites(files, seed=seed, backend_factory=factory,
                               manifest_path=assignment.root / "assignments.json")
    if code == pytest.ExitCode.INTERRUPTED:
        raise KeyboardInterrupt
    fault = getattr(made[0], "grader_fault", None) if made else None
    if fault is not None:  # pytest saw only failed tests: the fault is the grader's, not the student's
        raise fault
    card["timings"]["tests_s"] = round(time.monotonic() - t, 4)
    ids = {e.id for e in chosen}
    scores = [s for s in exercise_scores(results, assignment, require_cuda=require_cuda) if s.id in ids]
    withhold.apply(scores, verdict)
    scorecard.scored(card, scores, require_cuda=require_cuda)
    withhold.annotate(card, verdict)  # `integrity` findings, per-exercise `withheld`, the total without them
    # from the record made before grading: asking the spec again would re-create the groups just removed
    card["isolation"]["memory_figure"] = "cgroup" if card["isolation"]["cgroup"] != "none" else "in-process"
    worker = made[0] if made else None
    if worker is not None and hasattr(worker, "incidents"):
        sandbox = cast("SandboxBackend", worker)  # only the sandbox backend keeps incidents
        card["incidents"] = [{**i, "message": scorecard.clean(i["message"])} for i in sandbox.incidents]
        card["student_output"] = {"stdout_bytes": sandbox.output["stdout"], "stderr_bytes": sandbox.output["stderr"]}
        card["isolation"]["worker_starts"] = sandbox.starts
        card["isolation"]["worker_forks"] = sandbox.forked


def launch_spec(assignment: manifest.Assignment, backend: str, *, slot: int = 0, threads: int = 1) -> iso.LaunchSpec:
    """The worker launch spec ``grade()`` uses (so a caller can pre-start a matching warm worker)."""
    return iso.LaunchSpec(backend if backend != "inprocess" else "none", slot=slot, threads=threads,
                          limits=_limits(assignment))


def _limits(assignment: manifest.Assignment) -> iso.Limits:
    lim = assignment.limits
    return iso.Limits(memory_mb=lim.memory_mb, processes=lim.processes, file_size_mb=lim.file_size_mb,
                      cpu_s=int(lim.submission_wall_s), output_bytes=lim.output_kb << 10)


def _skeleton(assignment: manifest.Assignment, submission: Path | str, seed: int, spec: iso.LaunchSpec,
              backend: str, started: str, student_id: str | None, exercises: list[str] | None) -> dict[str, Any]:
    isolation = spec.describe() if backend != "inprocess" else {
        **spec.describe(), "backend": "inprocess", "cgroup": "none"}
    chosen = set(exercises or assignment.ids())  # an intake error's card is out of what was to be graded
    max_score = sum(e.points for e in assignment.exercises if e.id in chosen)
    return scorecard.new(assignment=assignment.id, max_score=max_score, path=submission,
                         isolation=isolation, seed=seed, student=student_id, started=started)


def _finish(card: dict[str, Any], t0: float, *, error: tuple[str, str] | None = None) -> dict[str, Any]:
    if error is not None:
        scorecard.with_error(card, *error)
    return scorecard.finished(card, seconds=time.monotonic() - t0)
