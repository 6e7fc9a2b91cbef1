"""CLI for the classroom feature: ``check`` and ``ci`` (students).

:func:`register` adds both to the instructor's ``grader`` (whose ``release`` lives in
:mod:`grader.cli.release`, which builds on this package); :func:`student_run` is the
``grader`` console script of a released student repository.
Errors are one line that says what to do, exit status 2.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

from grader.errors import NO_NUMPY, ExitCode, exit_now

EXIT_OK, EXIT_FAILED, EXIT_USAGE = ExitCode.OK, ExitCode.FAILED, ExitCode.USAGE


def _usage(message: str) -> int:
    print(f"grader: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def _cmd_check(args: argparse.Namespace) -> int:
    from grader.check import local as check
    from grader.scoring import scorecard

    try:  # the assignment is loaded once, here, and handed down
        assignment = check.load(
            manifest_path=Path(args.manifest) if args.manifest else None, assignment=args.assignment
        )
        card = check.check(exercises=args.exercises, pdb=args.pdb, assignment=assignment)
    except check.CheckError as exc:
        return _usage(str(exc))
    if args.json:
        print(scorecard.dumps(card))
    else:
        check.render(card)
    return EXIT_FAILED if check.failed(card) else EXIT_OK


def _cmd_ci(args: argparse.Namespace) -> int:
    from grader.check import ci
    from grader.check import local as check
    from grader.course import manifest

    try:  # loaded once, here; the child that runs the tests is told which manifest and assignment
        assignment = check.load(
            manifest_path=Path(args.manifest) if args.manifest else None, assignment=args.assignment
        )
        for exercise in args.exercises:
            assignment.exercise(exercise)
    except (check.CheckError, manifest.ManifestError) as exc:
        return _usage(str(exc))
    result = ci.ci(assignment, fmt=args.format, exercises=args.exercises, timeout_s=args.timeout)
    where = ci.emit(result)
    score = sum(t["score"] for t in result["tests"])
    print(
        f"grader ci: {result['status']}: {score:g}/{result['max_score']:g} public points; {where}",
        file=sys.stderr,
    )
    return EXIT_OK  # the reporter step turns a failing result into a red check, not this step


def _add_student_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "check", help="run the public tests against ./exercises and say what to fix next"
    )
    p.add_argument("exercises", nargs="*", metavar="EXERCISE", help="exercise ids (default: all)")
    p.add_argument(
        "--json", action="store_true", help="print a scorecard-shaped JSON document instead"
    )
    p.add_argument("--pdb", action="store_true", help="stop in the debugger at the first failure")
    _add_manifest_options(p)
    p.set_defaults(func=_cmd_check)
    p = sub.add_parser("ci", help="CI step: public tests as a GitHub Classroom runner result")
    p.add_argument("exercises", nargs="*", metavar="EXERCISE", help="exercise ids (default: all)")
    p.add_argument("--format", choices=["github-classroom"], default="github-classroom")
    p.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="wall-clock limit for all public tests (default 600)",
    )
    _add_manifest_options(p)
    p.set_defaults(func=_cmd_ci)


def _add_manifest_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--manifest",
        metavar="FILE",
        help="assignments.json (default: the repository's, found from here); "
        "the public tests and exercises/ beside it are used",
    )
    p.add_argument(
        "--assignment",
        metavar="ID",
        help="the assignment in the manifest (default: its default one; "
        "a released repository holds one)",
    )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``check`` and ``ci`` for the instructor's ``grader`` (``release`` is the delivery
    package's)."""
    _add_student_commands(sub)


def student_run() -> None:
    """The ``grader`` console script of a student repository: :func:`student_main`, then a quick
    exit (every student command is a quick one: see :func:`grader.errors.exit_now`)."""
    exit_now(student_main(sys.argv[1:]))


def student_main(argv: Sequence[str] | None = None) -> int:
    """The ``grader`` command of a student repository."""
    parser = argparse.ArgumentParser(
        prog="grader", description="Check your exercises against the public tests."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_student_commands(sub)
    args = parser.parse_args(argv)
    warnings.filterwarnings(
        "ignore", message=NO_NUMPY, category=UserWarning
    )  # nothing a student can act on
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("grader: interrupted", file=sys.stderr)
        return 130
