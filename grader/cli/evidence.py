"""The class's similar code and same wrong answers, computed for a person to review (never a
penalty): what ``grader similarity`` and ``grader merge --similarity`` share, kept apart so neither
command module imports the other (test_layers). A batch output's summary and report are rewritten
with the evidence."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from grader.cardtypes import Scorecard
from grader.errors import ExitCode, UsageError


def similarity(
    path: Path,
    *,
    klass: Path | None = None,
    assignment: str | None = None,
    manifest_path: Path | None = None,
    exercises: list[str] | None = None,
    as_json: bool = False,
) -> int:
    """Print the evidence for ``path`` (a batch output, its ``scorecards/``, or a class folder: code
    only; with ``klass``, that class's code too) and rewrite a batch output's summary and report
    with it; the exit code."""
    from grader.course import manifest
    from grader.intake import classfolder as discover
    from grader.similarity import summary

    if not path.is_dir():
        raise UsageError(
            f"{path}: not a folder; give a grader batch --out folder, its scorecards/ or a class folder"
        )
    folder = _scorecards(path)
    named = _cards(folder) if folder is not None else []
    klass = klass if klass is not None else (path if folder is None else None)
    loaded = manifest.load(
        manifest_path, named[0][1]["assignment"] if named and not assignment else assignment
    )
    entries = []
    if klass is not None:
        found = discover.discover(klass, assignment=loaded.id)
        entries = [(e.key, e.path) for e in found.entries if not e.clash]
    section = summary.compute(
        entries=entries, cards=named, assignment=loaded, exercise_ids=exercises
    )
    if as_json:
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


def _cards(folder: Path) -> list[tuple[str, Scorecard]]:
    from grader.batch import cards

    found = [(p.name.removesuffix(".json"), cards.load(p)) for p in sorted(folder.glob("*.json"))]
    return [(key, card) for key, card in found if card is not None]


def _scorecards(path: Path) -> Path | None:
    """The scorecards folder PATH names (itself, or a batch output's ``scorecards/``); ``None``: a
    class."""
    if (path / "scorecards").is_dir():
        return path / "scorecards"
    return path if any(path.glob("*.json")) and not any(path.glob("*.py")) else None


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
    """The batch output's summary.json and report.html, with the evidence (the summary is validated
    first)."""
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
