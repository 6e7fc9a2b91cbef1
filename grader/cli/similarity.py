"""``grader similarity PATH``: the class's similar code and same wrong answers (thin shell over
grader.similarity).

PATH is a ``grader batch`` output folder (its ``scorecards/``; with ``--class``, the class's code
too: the summary and report there are rewritten with the evidence), a folder of scorecards, or a
class folder (code only). Exit codes: 0 done (whatever was found), 2 usage error.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def _cmd_similarity(args: argparse.Namespace) -> int:
    from grader.cli import evidence

    return evidence.similarity(
        Path(args.path),
        klass=Path(args.klass) if args.klass else None,
        assignment=args.assignment,
        manifest_path=Path(args.manifest) if args.manifest else None,
        exercises=args.exercise,
        as_json=args.json,
    )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "similarity",
        help="similar code (renaming undone, stubs left out) and same wrong answers "
        "across a class: evidence for a person to review, never a penalty",
    )
    p.add_argument(
        "path",
        metavar="SCORECARDS_DIR|CLASS",
        help="a grader batch --out folder, its scorecards/, or a class folder (code only)",
    )
    p.add_argument(
        "--class",
        dest="klass",
        metavar="DIR",
        help="the class folder whose code to compare (with a "
        "scorecards folder; the batch's summary.json and report.html are then rewritten)",
    )
    p.add_argument(
        "--assignment",
        help="the assignment (default: the scorecards', else the manifest's default)",
    )
    p.add_argument("--manifest", metavar="FILE", help="assignments.json (default: this checkout's)")
    p.add_argument(
        "--exercise", action="append", metavar="ID", help="only this exercise (repeatable)"
    )
    p.add_argument("--json", action="store_true", help="print the summary's similarity object")
    p.set_defaults(func=_cmd_similarity)
