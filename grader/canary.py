"""The grader proves it can grade before it scores anyone: the canary.

Before ``grader grade`` or ``grader batch`` grades a student, the reference solutions and the stubs
are graded in the same sandbox configuration (backend, limits, exercises, time limits). The
solutions must get full marks and the stubs zero; otherwise the run is refused with the reason
("reference solutions scored 0/100 here: RuntimeError: Numpy is not available") and no student
scorecard is written. A machine that cannot grade (a missing dependency, a broken sandbox, CUDA that
does not initialise) then fails loudly instead of giving every student 0.

On a machine's first ``grader grade`` the proof is made beside the student's grade instead, in
forked copies of the command (:mod:`grader.canary_beside`); the student's card is shown only once
it holds.

The proof is cached (:mod:`grader.proofs`) per (grader source, manifest and suites, environment,
launch configuration, exercises): a batch pays for it once, and so does every later run on an
unchanged machine. It keeps the CPU time each reference test took, from which the grades after it
take their per-test limits.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from grader import procs, proofs
from grader.cardtypes import Scorecard, error_of
from grader.course import manifest
from grader.errors import GraderFault
from grader.proofs import Proof, cache_dir, cache_key, cached
from grader.sandbox.levels import BackendName

__all__ = [
    "CACHE_ENV",
    "Attested",
    "CanaryFailed",
    "Proof",
    "attest",
    "cache_dir",
    "cache_key",
    "cached",
    "prove",
    "zygote_for_proof",
]

if TYPE_CHECKING:
    from grader.options import GradeOptions
    from grader.sandbox.shared_zygote import SharedZygote
    from grader.sandbox.starters import WorkerStarter

CACHE_ENV = procs.CACHE_ENV
SOLUTIONS, STUBS = "solutions", "exercises"  # what the canary grades, under the assignment's root


PROVING = (
    "proving the grader first: grading the reference solutions (full marks expected) and the stubs (zero "
    "expected) in the sandbox, as the students will be; cached until the grader, suites or machine change…"
)


def proven(record: dict[str, Any], seconds: float) -> str:
    """The line that says the proof holds (``record``: :meth:`Proof.record`)."""
    how = "cached proof" if record["cached"] else f"proven in {seconds:.0f} s"
    top = record["max_score"]
    return (
        f"canary: reference solutions {record['solutions']:g}/{top:g}, stubs {record['stubs']:g}/{top:g} "
        f"({how})"
    )


class CanaryFailed(GraderFault):
    """This machine cannot grade correctly: the message names what failed."""

    label = "refusing to grade"


@dataclass(frozen=True)
class Attested:
    """What a run attests before it grades anyone (:func:`attest`): ``record``, the proof's
    (:meth:`Proof.record`; None: the canary is off), and ``zygote``, the one the proof's workers
    forked from (the caller's now, to grade from or close)."""

    record: dict[str, Any] | None
    zygote: SharedZygote | None = None


class _Where(TypedDict):
    """The configuration a proof is made (and cached) for."""

    backend: BackendName
    exercises: list[str] | None
    per_test_time_limit: float | None


def attest(
    assignment: manifest.Assignment,
    *,
    backend: BackendName,
    exercises: list[str] | None = None,
    per_test_time_limit: float | None = None,
    enabled: bool = True,
    fork: bool = False,
    say: Callable[[str], None] | None = None,
    known_cached: bool = False,
) -> Attested:
    """Prove, then grade: the one decision every path that grades students makes first. ``enabled``
    False (the project's own tests): nothing proven, nothing attested. Else a proof that is due is
    announced to ``say`` (it takes tens of seconds), its workers fork from this user's zygote when
    ``fork`` (started now, as the students' will fork: :func:`zygote_for_proof`), and its record is
    what the run attests. A machine that cannot grade raises :class:`CanaryFailed`: the caller
    refuses to grade (or reports it, where refusing is another machine's decision); the zygote is
    closed then, else handed to the caller. ``known_cached``: the caller has just found a cached
    proof (each question computes the key: 5 ms)."""
    if not enabled:
        return Attested(None)
    where = _Where(backend=backend, exercises=exercises, per_test_time_limit=per_test_time_limit)
    if say is not None and not known_cached and cached(assignment, **where) is None:
        say(PROVING)
    zygote = zygote_for_proof(assignment, **where) if fork else None
    return proved_with(assignment, zygote, say, **where)


def proved_with(
    assignment: manifest.Assignment,
    zygote: SharedZygote | None,
    say: Callable[[str], None] | None,
    **where: Unpack[_Where],
) -> Attested:
    """The proof made (or read) now, its workers forked from ``zygote`` (closed if it fails)."""
    t0 = time.monotonic()
    try:
        record = prove(assignment, **where, starter=forking(zygote)).record()
    except BaseException:
        if zygote is not None:
            zygote.close()
        raise
    if say is not None:
        say(proven(record, time.monotonic() - t0))
    return Attested(record, zygote)


def forking(zygote: SharedZygote | None) -> WorkerStarter | None:
    """The proof's workers' starter: forks of ``zygote``, else freshly exec'd ones."""
    from grader.sandbox.starters import ZygoteStarter

    return ZygoteStarter(zygote) if zygote is not None else None


def prove(
    assignment: manifest.Assignment,
    *,
    backend: BackendName,
    exercises: list[str] | None = None,
    per_test_time_limit: float | None = None,
    starter: WorkerStarter | None = None,
) -> Proof:
    """Grade solutions and stubs under ``backend`` (or reuse a cached proof); raise
    :class:`CanaryFailed`.

    ``starter`` starts their sandboxed workers the way the students' will be started (forks of this
    user's zygote, where the command uses one); None: freshly exec'd workers."""
    key = cache_key(
        assignment, backend=backend, exercises=exercises, per_test_time_limit=per_test_time_limit
    )
    found = proofs.read(key)
    if found is not None:
        return found
    from grader.grade import grade

    options = grade_options(assignment, backend, exercises, per_test_time_limit)
    solutions = grade(
        assignment.root / SOLUTIONS, options=options, assignment=assignment, starter=starter
    )
    _check(solutions, "reference solutions", want_full=True)
    stubs = grade(assignment.root / STUBS, options=options, assignment=assignment, starter=starter)
    return proven_from(key, solutions, stubs)


def proven_from(key: str, solutions: Scorecard, stubs: Scorecard) -> Proof:
    """The proof the two grades make, written to the cache (:class:`CanaryFailed` unless the
    references scored full marks and the stubs zero)."""
    _check(solutions, "reference solutions", want_full=True)
    _check(stubs, "stubs (exercises/)", want_full=False)
    proof = Proof(
        key,
        solutions["score"],
        stubs["score"],
        solutions["max_score"],
        cached=False,
        references=proofs.references_from(solutions),
    )
    proofs.write(key, proof)
    return proof


def grade_options(
    assignment: manifest.Assignment,
    backend: BackendName,
    exercises: list[str] | None = None,
    per_test_time_limit: float | None = None,
) -> GradeOptions:
    """How the canary grades the references and the stubs: the configuration it proves."""
    from grader.options import GradeOptions

    return GradeOptions(
        assignment=assignment.id,
        manifest_path=assignment.manifest,
        isolation=backend,
        exercises=exercises,
        per_test_time_limit=per_test_time_limit,
    )


def _check(card: Scorecard, what: str, *, want_full: bool) -> None:
    score, top = card["score"], card["max_score"]
    if card["status"] == "graded" and (score == top if want_full else score == 0) and top > 0:
        return
    expected = f"{top:g}/{top:g}" if want_full else f"0/{top:g}"
    raise CanaryFailed(
        f"{what} scored {score:g}/{top:g} here (expected {expected}): {_first_problem(card)}; "
        "this machine cannot grade correctly, so no student was graded (fix the environment, "
        "or see `grader grade solutions` for every failing test)"
    )


def _first_problem(card: Scorecard) -> str:
    if card["status"] == "error":
        error = error_of(card)
        return f"{error['kind']} error: {error['message'][:300]}"
    for exercise in card["exercises"]:
        for test in exercise["tests"]:
            if test["counted"] and (test["outcome"] != "passed") == (
                card["score"] < card["max_score"]
            ):
                first_line = (test["message"].splitlines() or [""])[0]
                return f"{test['id']}: {test['outcome']}: {first_line[:300]}"
    return "no failing test recorded"


def zygote_for_proof(
    assignment: manifest.Assignment,
    *,
    backend: BackendName,
    exercises: list[str] | None = None,
    per_test_time_limit: float | None = None,
) -> SharedZygote | None:
    """This user's zygote, started now when a proof is due under a backend that forks; None when a
    cached proof will do or the backend cannot fork. Started before the caller imports the grading
    side, it warms up meanwhile, and the proof's workers fork from it as the students' will (two
    cold workers were 3 CPU-seconds of a first run)."""
    from grader.sandbox import shared_zygote
    from grader.sandbox.zygote_client import FORKABLE

    if (
        backend not in FORKABLE
        or cached(
            assignment,
            backend=backend,
            exercises=exercises,
            per_test_time_limit=per_test_time_limit,
        )
        is not None
    ):
        return None
    return shared_zygote.warm(
        prepare=lambda: importlib.import_module("grader.grade")
    )  # torch, pytest meanwhile
