"""Subcommands beyond build/schema/selfcheck: each a thin shell over a keyword-only library
function."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader.cardtypes import Scorecard
from grader.course import manifest
from grader.errors import ExitCode, GraderFault, UsageError
from grader.options import DEFAULTS, GradeOptions, launch_spec
from grader.sandbox.levels import CHOICES as ISOLATION_CHOICES
from grader.sandbox.levels import LEVELS, BackendName

if TYPE_CHECKING:
    from grader.canary import Attested
    from grader.canary_beside import Beside
    from grader.sandbox.shared_zygote import SharedZygote
    from grader.sandbox.warm import WarmStart
    from grader.sandbox.zygote_client import Zygote


def _cmd_grade(args: argparse.Namespace) -> int:
    out = _check_grade_paths(Path(args.submission), Path(args.out) if args.out else None)
    from grader import schema
    from grader.sandbox import choice, mirror

    try:  # the schema checks' copy is main()'s to start and stop
        choice.probe_early()
        if schema.elsewhere is not None:
            # while the copy imports jsonschema: what a worker's launch reads from this machine (as
            # WarmStart would, later)
            mirror.prepare()
        return _grade_command(args, out)
    finally:
        choice.forget_early()


def _grade_command(args: argparse.Namespace, out: Path | None) -> int:
    from grader.sandbox import choice

    options = GradeOptions(
        assignment=args.assignment,
        manifest_path=Path(args.manifest) if args.manifest else None,
        isolation=args.isolation,
        require_isolation=args.require_isolation,
        seed=args.seed,
        require_cuda=args.require_cuda,
        canary=not args.no_canary,
        review_beside=True,
    )
    assignment = options.load()  # once for the whole command: the canary and the grade share it
    backend = choice.choose(
        options.isolation, options.require_isolation
    )  # once: the canary's, workers' and zygote's
    from grader import canary_beside

    # a proof that is due is made beside the student's grade (the copies fork before the warm
    # worker's thread starts), else read or made first; its zygote warms while grader.grade is
    # imported
    proving = canary_beside.begin(assignment, backend=backend, enabled=options.canary, say=_say)
    pending = proving if isinstance(proving, canary_beside.Beside) else None
    shared = proving.zygote or _shared_zygote(backend)
    warm = _prestart(
        options, assignment, backend, shared
    )  # starts while this process imports the grader's side
    try:
        card, record = _grade_attested(args.submission, options, assignment, warm, shared, proving)
    finally:
        if pending is not None:
            pending.cancel()  # Ctrl-C, or this grade failed first: nothing of the proof kept
        if warm is not None:
            warm.discard()
        if shared is not None:
            shared.close()
    if record is not None:
        card["canary"] = record
    _emit(card, out, as_json=args.json)
    if shared is None and warm is not None:
        _keep_warm(backend)
    return (
        ExitCode.OK if card["status"] == "graded" else ExitCode.FAILED
    )  # as `grader batch`: an error card is 1


def _shared_zygote(backend: BackendName) -> SharedZygote | None:
    """This user's long-lived zygote (:mod:`grader.sandbox.shared_zygote`) already running for this
    grader, if any, where the canary started none (it does when it has to grade first:
    :func:`grader.canary.attest`)."""
    from grader.sandbox import shared_zygote
    from grader.sandbox.zygote_client import FORKABLE

    return shared_zygote.connect() if backend in FORKABLE else None


def _say(line: str) -> None:
    """The canary's lines, as it goes: on stderr, flushed (a CI log shows them as they come)."""
    print(f"grader: {line}", file=sys.stderr, flush=True)


def _keep_warm(backend: BackendName) -> None:
    """After this run's work is written: start the long-lived zygote the next run will fork its
    workers from."""
    from grader.sandbox import shared_zygote
    from grader.sandbox.zygote_client import FORKABLE

    if backend in FORKABLE:
        shared_zygote.start()


def _prestart(
    options: GradeOptions,
    assignment: manifest.Assignment,
    backend: BackendName,
    zygote: Zygote | None,
) -> WarmStart | None:
    """The submission's first worker, started while this process imports ``grader.grade`` (torch,
    pytest): :func:`grader.sandbox.warm.prestart`."""
    from grader.sandbox import warm

    if backend == "inprocess":
        return None
    return warm.prestart(launch_spec(assignment, backend, threads=options.threads), zygote)


def _grade_attested(
    submission: str,
    options: GradeOptions,
    assignment: manifest.Assignment,
    warm: WarmStart | None,
    zygote: Zygote | None,
    proving: Attested | Beside,
) -> tuple[Scorecard, dict[str, Any] | None]:
    """The student's card and the proof's record: a pending proof settled after the grade made
    beside it (:class:`CanaryFailed` shows no card), which is graded again under the proof's
    limits unless they could not have changed it (:func:`grader.proofs.provisional_holds`)."""
    from grader import canary_beside, proofs

    if not isinstance(proving, canary_beside.Beside):
        return _grade(submission, options, assignment, warm, zygote), proving.record
    card = _grade(
        submission, dataclasses.replace(options, proof_pending=True), assignment, warm, zygote
    )
    record = proving.settle(say=_say)
    if not proofs.provisional_holds(card):
        card = _grade(submission, options, assignment, None, zygote)
    return card, record


def _grade(
    submission: str,
    options: GradeOptions,
    assignment: manifest.Assignment,
    warm: WarmStart | None,
    zygote: Zygote | None,
) -> Scorecard:
    from grader.grade import grade  # torch and pytest: while the warm worker starts
    from grader.sandbox.starters import ZygoteStarter, with_prestarted

    # restarts after a timeout or crash fork too
    then = ZygoteStarter(zygote) if zygote is not None else None
    return grade(
        submission, options=options, assignment=assignment, starter=with_prestarted(warm, then)
    )


def _emit(card: Scorecard, out: Path | None, *, as_json: bool) -> None:
    """The scorecard to ``out`` and/or as JSON on stdout (``--json``), and the human summary: on
    stdout when it is all that is printed, else on stderr (stdout then holds only the JSON)."""
    from grader import gradetext
    from grader.schema import SchemaError
    from grader.scoring import scorecard

    try:
        text = scorecard.dumps(card)
        if out:
            scorecard.write(card, out)
    except SchemaError as exc:
        raise GraderFault(
            f"internal error: the scorecard failed its schema ({exc}); please report this"
        ) from None
    lines = [line for line in gradetext.summary(card) if line]
    lines += (
        [f"scorecard: {out}"]
        if out
        else []
        if as_json
        else ["(the whole scorecard: --json, or --out FILE)"]
    )
    print("\n".join(lines), file=sys.stderr if as_json or out else sys.stdout, flush=True)
    if as_json:
        print(text)


def _check_grade_paths(submission: Path, out: Path | None) -> Path | None:
    """Refuse, before any grading, a submission that is not there and an --out that is a folder."""
    if not submission.exists() and not submission.is_symlink():
        raise UsageError(
            f"submission not found: {submission} (give a folder, .py, .ipynb, .zip or .tar.gz)"
        )
    if out is not None and out.is_dir():
        raise UsageError(
            f"--out {out} is a folder: give the scorecard's file name, e.g. {out / 'scorecard.json'}"
        )
    return out


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("grade", help="grade one submission against the hidden suites, in a sandbox")
    p.add_argument(
        "submission", help="folder (modules at the top or in exercises/), .py, .zip or .tar.gz"
    )
    p.add_argument("--assignment", default=DEFAULTS.assignment)
    p.add_argument(
        "--manifest",
        metavar="FILE",
        help="assignments.json (default: this checkout's); the solutions "
        "and suites beside it are used",
    )
    p.add_argument("--out", help="also write the scorecard to this file")
    p.add_argument(
        "--json",
        action="store_true",
        help="print the scorecard as JSON on stdout (the summary then goes to stderr)",
    )
    p.add_argument(
        "--isolation",
        choices=ISOLATION_CHOICES,
        default=DEFAULTS.isolation,
        help="sandbox backend (default: the strongest available)",
    )
    p.add_argument(
        "--require-isolation",
        choices=LEVELS,
        metavar="LEVEL",
        help="refuse to grade below this level (none < process < bwrap < namespace)",
    )
    p.add_argument(
        "--seed", type=int, help="reproduce a run's inputs (default: a fresh random seed)"
    )
    p.add_argument(
        "--require-cuda",
        action="store_true",
        help="count CUDA tests in max_score even without a GPU",
    )
    p.add_argument(
        "--no-canary", action="store_true", help=argparse.SUPPRESS
    )  # the project's own tests only
    p.set_defaults(func=_cmd_grade)
    from grader.cli import batch as batch_cli
    from grader.cli import release as delivery_cli
    from grader.cli import student as classroom_cli

    batch_cli.register(sub)
    classroom_cli.register(sub)
    delivery_cli.register(sub)
    from grader.cli import similarity as similarity_cli

    similarity_cli.register(sub)
