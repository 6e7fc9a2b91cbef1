"""Subcommands beyond build/schema/selfcheck: each a thin shell over a keyword-only library function."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ISOLATION_CHOICES = ["auto", "namespace", "bwrap", "process", "none"]
LEVELS = ["none", "process", "bwrap", "namespace"]


def _cmd_grade(args: argparse.Namespace) -> int:
    from grader.cli import EXIT_FAULT, EXIT_OK, UsageError
    from grader.grade import GradeRefused, grade
    from grader.schema import SchemaError
    from grader.scoring import scorecard

    try:
        card = grade(args.submission, assignment=args.assignment, isolation=args.isolation,
                     require_isolation=args.require_isolation, seed=args.seed, require_cuda=args.require_cuda)
    except GradeRefused as exc:
        raise UsageError(str(exc)) from None
    try:
        if args.out:
            scorecard.write(card, Path(args.out))
            print(f"{card['status']}: {card['score']:g}/{card['max_score']:g} -> {args.out}", file=sys.stderr)
        else:
            print(scorecard.dumps(card))
    except SchemaError as exc:
        print(f"grader: internal error: the scorecard failed its schema ({exc}); please report this", file=sys.stderr)
        return EXIT_FAULT
    return EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001 - argparse has no public type
    p = sub.add_parser("grade", help="grade one submission against the hidden suites, in a sandbox")
    p.add_argument("submission", help="folder (modules at the top or in exercises/), .py, .zip or .tar.gz")
    p.add_argument("--assignment", default="attention-basics")
    p.add_argument("--out", help="scorecard file (default: print to stdout)")
    p.add_argument("--isolation", choices=ISOLATION_CHOICES, default="auto",
                   help="sandbox backend (default: the strongest available)")
    p.add_argument("--require-isolation", choices=LEVELS, metavar="LEVEL",
                   help="refuse to grade below this level (none < process < bwrap < namespace)")
    p.add_argument("--seed", type=int, help="reproduce a run's inputs (default: a fresh random seed)")
    p.add_argument("--require-cuda", action="store_true", help="count CUDA tests in max_score even without a GPU")
    p.set_defaults(func=_cmd_grade)
    from grader.batch import cli as batch_cli
    from grader.classroom import cli as classroom_cli

    batch_cli.register(sub)
    classroom_cli.register(sub)
