"""``grader similarity PATH``: the class's similar code and same wrong answers (thin shell over grader.similarity).

PATH is a ``grader batch`` output folder (its ``scorecards/``; with ``--class``, the class's code too: the
summary and report there are rewritten with the evidence), a folder of scorecards, or a class folder (code only).
Exit codes: 0 done (whatever was found), 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from grader.errors import ExitCode, UsageError


def _cards(folder: Path) -> list[tuple[str, dict[str, Any]]]:
    from grader.batch import cards

    found = [(p.name.removesuffix(".json"), cards.load(p)) for p in sorted(folder.glob("*.json"))]
    return [(key, card) for key, card in found if card is not None]


def _scorecards(path: Path) -> Path | None:
    """The scorecards folder PATH names (itself, or a batch output's ``scorecards/``); ``None``: a class."""
    if (path / "scorecards").is_dir():
        return path / "scorecards"
    return path if any(path.glob("*.json")) and not any(path.glob("*.py")) else None


def _cmd_similarity(args: argparse.Namespace) -> int:
    from grader.course import manifest
    from grader.intake import classfolder as discover
    from grader.similarity import summary

    path = Path(args.path)
    if not path.is_dir():
        raise UsageError(
            f"{path}: not a folder; give a grader batch --out folder, its scorecards/ or a class folder"
        )
    folder = _scorecards(path)
    named = _cards(folder) if folder is not None else []
    klass = Path(args.klass) if args.klass else (path if folder is None else None)
    assignment = manifest.load(
        Path(args.manifest) if args.manifest else None,
        named[0][1]["assignment"] if named and not args.assignment else args.assignment,
    )
    entries = []
    if klass is not None:
        found = discover.discover(klass, assignment=assignment.id)
        entries = [(e.key, e.path) for e in found.entries if not e.clash]
    section = summary.compute(
        entries=entries, cards=named, assignment=assignment, exercise_ids=args.exercise
    )
    if args.json:
        print(json.dumps(section, indent=2))
    else:
        _print(section)
    if (
        folder is not None
        and folder.name == "scorecards"
        and (folder.parent / "summary.json").is_file()
    ):
        _rewrite(folder.parent, section)
    return ExitCode.OK


def _print(section: dict[str, Any]) -> None:
    print(section["note"])
    print(f"{section['pairs_found']} pair(s) of similar code:")
    for p in section["pairs"]:
        print(
            f"  {p['exercise']}: {p['a']} ~ {p['b']}  share {p['share']:.0%} ({p['matched_tokens']} tokens)"
        )
    print(
        f"{len(section['same_wrong_answers'])} same-wrong-answer group(s) "
        f"({section['common_wrong_answers']} common wrong answer(s) left out):"
    )
    for g in section["same_wrong_answers"]:
        print(
            f"  {', '.join(g['students'])}: {len(g['tests'])} test(s) failed with the same values"
        )


def _rewrite(out: Path, section: dict[str, Any]) -> None:
    """The batch output's summary.json and report.html, with the evidence (the summary is validated first)."""
    from grader import schema
    from grader.exports import lastrun, outputs, report

    doc = lastrun.read_summary(out / "summary.json")
    if doc is None:
        return
    doc["similarity"] = section
    try:
        schema.validate("summary", doc)
    except schema.SchemaError as exc:
        raise UsageError(
            f"{out / 'summary.json'}: {exc}; rerun grader batch with this grader"
        ) from None
    outputs.write_text(out / "summary.json", json.dumps(doc, indent=2) + "\n")
    outputs.write_text(out / "report.html", report.render(doc))
    print(f"wrote {out / 'summary.json'} and {out / 'report.html'}", file=sys.stderr)


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
