"""CLI for grading a class across machines: ``grader batch --shard K/N|auto`` and ``grader merge``
(thin shells).

Exit codes as ``grader batch``: 0 done, 1 some submission ended in an error, 2 usage error (a bad
``--shard``, shard outputs that do not belong together, a missing shard or student), 3 grader fault,
130 interrupted (finished scorecards are kept; the shard's manifest stays ``started``).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from grader.batch.results import Options
from grader.errors import ExitCode, UsageError


def add_options(p: argparse.ArgumentParser) -> None:
    """``--shard`` and ``--shards`` on ``grader batch``."""
    p.add_argument(
        "--shard",
        metavar="K/N|auto",
        help="grade only shard K of N (numbered from 1) of the class, split by a stable hash of each "
        "student id, and write shard-K-of-N.json for grader merge; auto reads GRADER_SHARD=K/N, "
        "SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX",
    )
    p.add_argument(
        "--shards",
        type=int,
        metavar="N",
        help="the number of shards, for --shard auto under a "
        "Kubernetes Indexed Job (its spec.completions; or set GRADER_SHARDS)",
    )


def batch_shard(args: argparse.Namespace, options: Options) -> int:
    """``grader batch --shard``: grade this shard and leave the rest to ``grader merge``."""
    from grader.batch import engine
    from grader.batch.progress import Progress
    from grader.cli import common as cli
    from grader.cluster import shard, shard_job

    chosen = shard.resolve(args.shard, shards=args.shards, env=os.environ)
    if args.roster or args.export:
        raise UsageError(
            "--roster and --export are applied when the shards are merged: give them to grader merge"
        )
    try:
        outcome = shard_job.grade_shard(
            args.submissions,
            out=args.out,
            options=options,
            shard=chosen,
            progress=Progress(rich=False if args.quiet else None),
        )
    except engine.BatchInterrupted as exc:
        print(
            f"grader: interrupted ({exc}); finished scorecards are kept in {Path(args.out) / 'scorecards'}; "
            "rerun the same command to resume",
            file=sys.stderr,
        )
        return ExitCode.INTERRUPTED
    results = outcome.run.results
    print(
        f"shard {chosen.label} (from {chosen.source}): {len(results)} of {outcome.total} submissions, "
        f"{sum(not r.skipped for r in results)} graded, {sum(r.skipped for r in results)} unchanged; "
        f"manifest: {outcome.manifest}; combine the shards with grader merge",
        file=sys.stderr,
    )
    return cli.report_errors(outcome.error_kinds())


def _cmd_merge(args: argparse.Namespace) -> int:
    from grader.cli import common as cli
    from grader.cluster import merge

    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise UsageError(
            f"--out {args.out} is a file: give a folder for the gradebook, summary and report"
        )
    if args.similarity and not args.klass:
        raise UsageError(
            "--similarity compares the class's code: give the class folder with --class DIR"
        )
    roster = cli.roster_of(args.roster)
    cli.warn_exports(args.export or (), roster)
    outcome = merge.merge(
        args.folders,
        out=args.out,
        export=tuple(args.export or ()),
        roster=roster,
        manifest_path=Path(args.manifest) if args.manifest else None,
    )
    s = outcome.summary
    print(
        f"merged: {s['counts']['submissions']} submissions, {s['counts']['graded']} graded, "
        f"{s['counts']['errors']} errors; mean {s['score']['mean']:g}/{s['score']['max_score']:g}; "
        f"report: {outcome.out / 'report.html'}",
        file=sys.stderr,
    )
    if args.similarity:  # over the merged class, never per shard: a pair may sit in two shards
        from grader.cli import evidence

        evidence.similarity(
            outcome.out,
            klass=Path(args.klass),
            manifest_path=Path(args.manifest) if args.manifest else None,
        )
    return cli.report_errors(outcome.error_kinds())


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from grader.cli.common import FORMATS

    p = sub.add_parser(
        "merge",
        help="combine the outputs of grader batch --shard K/N into one gradebook, "
        "summary, report and exports",
    )
    p.add_argument(
        "folders",
        nargs="+",
        metavar="DIR",
        help="a shard's --out folder, or a folder holding several",
    )
    p.add_argument(
        "--out",
        required=True,
        help="output folder (scorecards/, gradebook.csv, summary.json, report.html)",
    )
    p.add_argument(
        "--export", action="append", choices=FORMATS, help="also write this LMS export (repeatable)"
    )
    p.add_argument(
        "--roster",
        metavar="CSV",
        help="class list (login, name, email, lms_id), as for grader batch",
    )
    p.add_argument("--manifest", metavar="FILE", help="assignments.json (default: this checkout's)")
    p.add_argument(
        "--similarity",
        action="store_true",
        help="then list similar code and same wrong answers across "
        "the merged class (grader similarity OUT --class DIR; shards graded with one --seed): evidence "
        "for a person to review, never a penalty",
    )
    p.add_argument(
        "--class", dest="klass", metavar="DIR", help="with --similarity: the class folder graded"
    )
    p.set_defaults(func=_cmd_merge)
