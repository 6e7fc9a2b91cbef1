"""CLI registration for the batch feature: ``grader batch`` and ``grader export`` (thin shells).

Exit codes: 0 done (whatever the scores), 1 some submission ended in a grader error (rerun to retry
it), 2 usage error, 3 grader fault, 130 interrupted (finished scorecards are kept).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from grader.cli.common import FORMATS, finished, interrupted, roster_of, warn_exports
from grader.course import manifest
from grader.errors import ExitCode, UsageError


def _cmd_batch(args: argparse.Namespace) -> int:
    from grader.batch import engine, job
    from grader.batch.progress import Progress
    from grader.cli import dask as dask_cli

    if args.jobs is not None and args.jobs < 1:
        raise UsageError("-j must be at least 1")
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise UsageError(
            f"--out {args.out} is a file: give a folder for the scorecards, gradebook and report"
        )
    options = engine.Options(
        assignment=args.assignment,
        isolation=args.isolation,
        manifest_path=Path(args.manifest) if args.manifest else None,
        require_isolation=args.require_isolation,
        jobs=args.jobs,
        threads=args.threads,
        force=args.force,
        exercises=args.exercise or None,
        per_test_time_limit=args.per_test_time_limit,
        warm="off" if args.no_warm else args.warm,
        seed=_seed(args),
        canary=not args.no_canary,
    )
    if args.dask is not None or dask_cli.dask_only(
        args
    ):  # a Dask cluster grades: this process coordinates
        return dask_cli.batch_dask(args, options)
    if (
        args.shard is not None or args.shards is not None
    ):  # one shard of the class: grader merge writes the rest
        from grader.cli import shard as shard_cli

        if args.shard is None:
            raise UsageError(
                "--shards N is the count for --shard auto: give --shard auto (or --shard K/N)"
            )
        return shard_cli.batch_shard(args, options)
    roster = roster_of(args.roster)
    warn_exports(args.export or (), roster)
    try:
        outcome = job.batch(
            args.submissions,
            out=args.out,
            options=options,
            export=tuple(args.export or ()),
            progress=Progress(rich=False if args.quiet else None),
            roster=roster,
            similarity=args.similarity,
        )
    except engine.BatchInterrupted as exc:
        return interrupted(exc, args.out)
    return finished(outcome)


def _seed(args: argparse.Namespace) -> int | None:
    """``--seed``; with ``--similarity`` and no seed, one drawn for the whole class: wrong answers
    compare only between cards graded on the same seed (grader.similarity.answers)."""
    if args.seed is None and args.similarity:
        import secrets

        seed = secrets.randbelow(2**31)
        print(f"grader: --similarity grades the class on one seed: {seed}", file=sys.stderr)
        return seed
    return int(args.seed) if args.seed is not None else None


def _cmd_export(args: argparse.Namespace) -> int:
    from grader import schema
    from grader.exports import outputs

    named = []
    for name in args.scorecards:
        path = Path(name)
        try:
            card = json.loads(path.read_text("utf-8"))
            schema.validate("scorecard", card)
        except (OSError, ValueError) as exc:
            raise UsageError(
                f"{path}: not a readable scorecard ({exc}); give files written by grader grade/batch"
            ) from None
        named.append((path.name.removesuffix(".json"), card))
    try:
        assignment = manifest.load(None, named[0][1]["assignment"])
        ids, title = assignment.ids(), assignment.title
    except manifest.ManifestError:
        ids, title = sorted({e["id"] for _, c in named for e in c["exercises"]}), ""
    roster = roster_of(args.roster)
    warn_exports([args.format], roster)
    if args.out:
        for path in outputs.export(
            named, args.format, Path(args.out), ids, roster=roster, title=title
        ):
            print(f"wrote {path}", file=sys.stderr)
        return ExitCode.OK
    if args.format in ("csv", "canvas", "moodle"):
        with tempfile.TemporaryDirectory() as tmp:  # the same writer as --out, read back for stdout
            [path] = outputs.export(named, args.format, Path(tmp), ids, roster=roster, title=title)
            sys.stdout.write(path.read_text("utf-8"))
        return ExitCode.OK
    if len(named) > 1:
        raise UsageError(
            f"{len(named)} scorecards: give --out DIR to write one {args.format} file each"
        )
    from grader.exports import gradescope, rows

    convert = gradescope.document if args.format == "gradescope" else rows.to_github_classroom
    print(json.dumps(convert(named[0][1]), indent=2))
    return ExitCode.OK


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from grader.options import DEFAULTS
    from grader.sandbox.levels import CHOICES as ISOLATION_CHOICES
    from grader.sandbox.levels import LEVELS

    p = sub.add_parser(
        "batch", help="grade a whole class in parallel: scorecards, gradebook, summary, report"
    )
    p.add_argument(
        "submissions",
        help="folder of per-student folders/archives/.py files, nbgrader's submitted/, "
        "or a GitHub Classroom <assignment>-submissions/ clone",
    )
    p.add_argument(
        "--out",
        required=True,
        help="output folder (scorecards/, gradebook.csv, summary.json, report.html)",
    )
    p.add_argument("--assignment", default=DEFAULTS.assignment)
    p.add_argument(
        "--manifest",
        metavar="FILE",
        help="assignments.json (default: this checkout's); the solutions "
        "and suites beside it are used, by every slot",
    )
    p.add_argument(
        "-j", "--jobs", type=int, help="parallel grading slots (default: number of cores)"
    )
    p.add_argument(
        "--threads",
        type=int,
        default=DEFAULTS.threads,
        help=f"torch threads per slot (default {DEFAULTS.threads})",
    )
    p.add_argument(
        "--force", action="store_true", help="regrade submissions whose scorecard is up to date"
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
        "--exercise", action="append", metavar="ID", help="grade only this exercise (repeatable)"
    )
    p.add_argument(
        "--export", action="append", choices=FORMATS, help="also write this LMS export (repeatable)"
    )
    p.add_argument(
        "--roster",
        metavar="CSV",
        help="class list (login, name, email, lms_id): adds those columns to "
        "the gradebook and a 0 `missing` row for each student with no submission",
    )
    p.add_argument(
        "--seed", type=int, help="one seed for every submission (default: a fresh seed each)"
    )
    p.add_argument(
        "--similarity",
        action="store_true",
        help="also list pairs of similar code per exercise (renaming "
        "undone, the stubs left out) and groups with the same wrong answers, in summary.json and report.html",
    )
    p.add_argument("--per-test-time-limit", type=float, metavar="S", help=argparse.SUPPRESS)
    p.add_argument(
        "--warm",
        choices=("fork", "start", "off"),
        default="fork",
        help="how sandboxed workers get torch before a submission arrives: fork them from a zygote that "
        "imported it once (default), pre-start one per submission, or start each cold (measurements)",
    )
    p.add_argument("--no-warm", action="store_true", help="same as --warm off")
    p.add_argument(
        "--quiet",
        action="store_true",
        help="plain one-line-per-submission progress even on a terminal",
    )
    p.add_argument(
        "--no-canary", action="store_true", help=argparse.SUPPRESS
    )  # the project's own tests only
    from grader.cli import shard as shard_cli

    shard_cli.add_options(p)
    from grader.cli import dask as dask_cli

    dask_cli.add_options(p)
    p.set_defaults(func=_cmd_batch)
    p = sub.add_parser(
        "export", help="convert scorecards to Gradescope, GitHub Classroom, CSV, Canvas or Moodle"
    )
    p.add_argument("scorecards", nargs="+", metavar="SCORECARD")
    p.add_argument("--format", required=True, choices=FORMATS)
    p.add_argument("--out", help="folder to write into (default: stdout, one scorecard, or CSV)")
    p.add_argument(
        "--roster",
        metavar="CSV",
        help="class list (login, name, email, lms_id) for csv, canvas, moodle",
    )
    p.set_defaults(func=_cmd_export)
    shard_cli.register(sub)  # grader merge
