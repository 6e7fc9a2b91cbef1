"""``grader``: a thin argparse shell over keyword-only library functions.

Exit codes are :class:`grader.errors.ExitCode`: 0 done (whatever the score), 1 checks failed or some
submission ended in an error, 2 the caller's mistake, 3 a grader fault, 130 interrupted. Every
:class:`grader.errors.GraderError` becomes one line that says what to do next, never a traceback.
"""

from __future__ import annotations

import argparse
import signal
import sys
import warnings
from collections.abc import Sequence

from grader.errors import NO_NUMPY, ExitCode, GraderFault, UsageError, exit_now

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_FAULT = (
    ExitCode.OK,
    ExitCode.FAILED,
    ExitCode.USAGE,
    ExitCode.FAULT,
)
QUICK = frozenset({"grade", "check", "ci"})  # commands a person (or a CI step) waits on: see run()


def _cmd_build(args: argparse.Namespace) -> int:
    from grader.course import build

    for path in build.build():
        print(f"wrote {path}")
    return EXIT_OK


def _cmd_schema(args: argparse.Namespace) -> int:
    import json

    from grader import schema

    try:
        print(json.dumps(schema.load_schema(args.kind), indent=2))
    except KeyError as exc:
        raise UsageError(exc.args[0]) from None
    return EXIT_OK


def _cmd_selfcheck(args: argparse.Namespace) -> int:
    from grader import selfcheck

    return selfcheck.main(cuda=args.cuda)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grader", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p = sub.add_parser("build", help="regenerate exercises/ from solutions/ (needs nbgrader)")
    p.set_defaults(func=_cmd_build)
    p = sub.add_parser("schema", help="print a JSON Schema (scorecard, assignments, ...)")
    p.add_argument("kind", help="scorecard | assignments")
    p.set_defaults(func=_cmd_schema)
    p = sub.add_parser(
        "selfcheck", help="check the reference solutions (with --cuda: against flash SDPA)"
    )
    p.add_argument("--cuda", action="store_true", help="run the CUDA flash-attention comparison")
    p.set_defaults(func=_cmd_selfcheck)
    from grader.cli import grading as commands

    commands.register(sub)
    return parser


def _terminate(signum: int, frame: object) -> None:
    # SIGTERM cleans up like Ctrl-C: sandboxes killed, temporary folders removed
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    grading = list(sys.argv[1:] if argv is None else argv)[:1] == ["grade"]
    if grading:
        from grader import schema_beside

        # before the command line is built (its modules take 40 ms to import): jsonschema is then
        # imported by the time the manifest is read
        schema_beside.start()
    try:  # Ctrl-C while the command line is built, too, ends as an interruption
        args = build_parser().parse_args(argv)
        warnings.filterwarnings(
            "ignore", message=NO_NUMPY, category=UserWarning
        )  # it reads like an error to a student
        if args.command in ("grade", "batch"):
            from grader.sandbox import sweep

            sweep.sweep()  # what killed runs left: their temporary folders and cgroups
            if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
                signal.signal(signal.SIGTERM, _terminate)
        return int(args.func(args))
    except UsageError as exc:
        print(f"grader: {exc.label}: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    except GraderFault as exc:
        print(f"grader: {exc.label}: {exc}", file=sys.stderr)
        return ExitCode.FAULT
    except KeyboardInterrupt:
        print("grader: interrupted; finished results are kept", file=sys.stderr)
        return ExitCode.INTERRUPTED
    finally:
        if grading:
            schema_beside.stop()  # however the command ended (it stops the copy itself when it can)


def run() -> None:
    """The ``grader`` console script and ``python -m grader``: :func:`main`, then
    :func:`grader.errors.exit_now` after the quick commands (0.3 s of module teardown saved on
    each)."""
    argv = sys.argv[1:]
    code = main(argv)
    if argv[:1] and argv[0] in QUICK:
        exit_now(code)
    sys.exit(code)
