"""A machine's first run: the canary's proof made beside the student's grade, not before it.

``grader grade`` on a machine with no proof for this grader used to grade the references, then the
stubs, then the student, one after another on one core. Here the references and the stubs are each
graded in a forked copy of this trusted process (:mod:`grader.forked`) while this one grades the
student, and the student's card is shown only once the proof holds (:meth:`Beside.settle`: a
machine that cannot grade still refuses, and no card is shown).

The student's grade cannot wait for the per-test limits the proof teaches (:mod:`grader.proofs`),
so it runs under the lowest limits any proof could set (:func:`grader.proofs.while_proving`): a
grade in which no test reached them is exactly the grade the proof's limits would have given, and
one in which a test timed out is graded again under them (:func:`grader.proofs.provisional_holds`).
A correct submission is graded once; the first grade of a looping or sleeping one stops at its
first timeout (1 s of CPU, or the wall-clock backstop, never retried: ``until_first_timeout``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from grader import canary, forked, proofs, schema
from grader.cardtypes import Scorecard
from grader.course import manifest
from grader.sandbox.levels import BackendName

if TYPE_CHECKING:
    from grader.options import GradeOptions
    from grader.sandbox.shared_zygote import SharedZygote


@dataclass
class Beside:
    """The proof being made: one forked copy per grade (``copies``), the zygote their workers fork
    from (the caller's, to grade the student from and close)."""

    key: str
    copies: dict[str, forked.Forked]
    zygote: SharedZygote | None
    started: float

    def settle(self, say: Callable[[str], None] | None = None) -> dict[str, Any]:
        """Wait for both grades and check them (:class:`grader.canary.CanaryFailed`); the proof's
        record, the proof now cached."""
        try:
            cards = {what: _card(copy.result(), what) for what, copy in self.copies.items()}
        except forked.ForkedFault as exc:
            raise canary.CanaryFailed(
                f"the canary's grade could not run ({exc}); no student was graded"
            ) from None
        finally:
            self.cancel()
        record = canary.proven_from(self.key, cards[canary.SOLUTIONS], cards[canary.STUBS]).record()
        if say is not None:
            say(canary.proven(record, time.monotonic() - self.started))
        return record

    def cancel(self) -> None:
        """Stop the grades still running (Ctrl-C, or a student's grade that failed first)."""
        for copy in self.copies.values():
            copy.cancel()


def _card(value: object, what: str) -> Scorecard:
    """A copy's scorecard, read as strictly as any other (it is this grader's own, but JSON)."""
    try:
        schema.validate("scorecard", value)
    except schema.SchemaError as exc:
        raise forked.ForkedFault(f"the grade of {what}/ sent an invalid scorecard: {exc}") from None
    card: Scorecard = value  # type: ignore[assignment]  # validated just above
    return card


def begin(
    assignment: manifest.Assignment,
    *,
    backend: BackendName,
    enabled: bool = True,
    say: Callable[[str], None] | None = None,
) -> canary.Attested | Beside:
    """:func:`grader.canary.attest` for one command about to grade one submission: a proof that is
    due is started beside it (:class:`Beside`) where this process can fork; otherwise (a cached
    proof, the canary off, a process that cannot fork) the attestation, made first as before."""
    if not enabled:
        return canary.attest(assignment, backend=backend, enabled=False)
    if proofs.cached(assignment, backend=backend) is not None:
        return canary.attest(assignment, backend=backend, say=say, known_cached=True)
    if say is not None:
        say(canary.PROVING)
    zygote = canary.zygote_for_proof(assignment, backend=backend)
    from grader.grade import grade  # before the fork: the copies and this process share it

    started, copies = time.monotonic(), {}
    options = canary.grade_options(assignment, backend)
    for what in (canary.SOLUTIONS, canary.STUBS):
        copy = forked.start(_grading(grade, assignment, what, options, zygote), after_fork=_fresh)
        if copy is None:
            break
        copies[what] = copy
    if len(copies) == 2:
        key = proofs.cache_key(
            assignment, backend=backend, exercises=None, per_test_time_limit=None
        )
        return Beside(key, copies, zygote, started)
    for copy in copies.values():
        copy.cancel()
    # this process could not fork: the proof made here and now, before the student's grade
    return canary.proved_with(
        assignment, zygote, say, backend=backend, exercises=None, per_test_time_limit=None
    )


def _grading(
    grade: Callable[..., Scorecard],
    assignment: manifest.Assignment,
    what: str,
    options: GradeOptions,
    zygote: SharedZygote | None,
) -> Callable[[], Scorecard]:
    """What a copy runs: the grade of ``what``, its workers forked from the zygote over the copy's
    own connection (the workers a connection asked for die with it; the parent's is the parent's)."""

    def work() -> Scorecard:
        from grader.sandbox import shared_zygote

        own = None
        if zygote is not None:
            zygote.close()  # this copy's duplicate of the parent's connection only
            own = shared_zygote.connect()
        try:
            return grade(
                assignment.root / what,
                options=options,
                assignment=assignment,
                starter=canary.forking(own),
            )
        finally:
            if own is not None:
                own.close()

    return work


def _fresh() -> None:
    """In a copy, first: the parent's uid leases are the parent's (a lock inherited across fork
    would let two live sandboxes share a uid): the copy leases its own."""
    from grader.sandbox import uids

    uids.forget()
