"""``grader merge``: check that shard outputs belong together, then write what a single batch
writes.

Each folder given is a shard's ``--out`` (it holds ``shard-K-of-N.json``), or holds several (shards
that shared one ``--out``, or one sub-folder per shard). The merge refuses, naming every problem at
once and writing nothing, when the shards disagree (grader version, assignment, exercises, seed,
canary, the class they saw, the number of shards), when a shard is missing or unfinished, when a
student is graded by two shards or has no scorecard, or when a scorecard is invalid. Otherwise it
copies the scorecards into ``OUT/scorecards`` and hands the combined run to the single-machine
batch's own writers (:func:`grader.batch.job.finish`): gradebook, summary, report and exports come
out exactly as ``grader batch`` writes them. Every file is written atomically.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any

from grader import schema
from grader.batch import job
from grader.batch.engine import Options, Result, Run
from grader.cardtypes import AnyCard
from grader.cluster import mergecheck
from grader.cluster.mergecheck import Part, card_name, names
from grader.errors import UsageError
from grader.exports import outputs
from grader.intake.classfolder import Entry
from grader.intake.roster import Student
from grader.sandbox.levels import LEVELS
from grader.scoring import scorecard

# what fixes an unusable card: grader batch regrades a card that fails its schema or its shard
REGRADE = (
    "rerun their shard's command, which regrades only those students, or restore each card as the grader "
    "wrote it; then merge again"
)


class MergeError(UsageError):
    """The shard outputs cannot be merged as given: the message lists every reason (exit 2)."""


def merge(
    folders: list[Path | str],
    *,
    out: Path | str,
    export: tuple[str, ...] = (),
    roster: list[Student] | None = None,
    manifest_path: Path | None = None,
) -> job.Outcome:
    """Combine the shard outputs in ``folders`` into ``out`` (see the module docstring); raise
    :class:`MergeError`."""
    out = Path(out)
    parts = find(folders)
    cards, problems = _cards(parts)
    problems = mergecheck.check(parts) + problems
    if problems:
        raise MergeError(_describe(problems, parts))
    first = parts[0].doc
    options = Options(
        assignment=first["assignment"],
        manifest_path=manifest_path,
        exercises=list(first["exercises"]),
        seed=first["seed"],
    )
    assignment = options.load()
    for exercise_id in first["exercises"]:
        assignment.exercise(
            exercise_id
        )  # the merging machine's manifest must know every exercise graded
    _copy_cards(parts, out)
    run = combined(parts, cards)
    ignored = max((p.doc["class"]["ignored"] for p in parts), key=len)
    return job.finish(
        run,
        out=out,
        options=options,
        export=export,
        ignored=ignored,
        roster=roster,
        assignment=assignment,
    )


def find(folders: list[Path | str]) -> list[Part]:
    """Every shard manifest in ``folders`` (or one level down), each validated, in shard order."""
    seen: dict[str, Part] = {}
    for folder in map(Path, folders):
        if not folder.is_dir():
            raise MergeError(
                f"{folder}: not a folder; give the --out folders of grader batch --shard K/N"
            )
        paths = sorted(folder.glob("shard-*-of-*.json")) or sorted(
            folder.glob("*/shard-*-of-*.json")
        )
        if not paths:
            raise MergeError(
                f"{folder}: no shard manifest (shard-K-of-N.json) here or one folder down; "
                "give the --out folders of grader batch --shard K/N"
            )
        for path in paths:
            seen.setdefault(os.path.realpath(path), Part(path, _load(path)))
    return sorted(
        seen.values(), key=lambda p: (p.doc["shard"]["count"], p.doc["shard"]["index"], str(p.path))
    )


def _load(path: Path) -> dict[str, Any]:
    try:
        doc: dict[str, Any] = json.loads(path.read_text("utf-8"))
        schema.validate("shard", doc)
    except (OSError, ValueError) as exc:
        raise MergeError(
            f"{path}: not a readable shard manifest ({exc}); rerun that shard"
        ) from None
    return doc


def _cards(parts: list[Part]) -> tuple[dict[str, AnyCard], list[str]]:
    """Each student's scorecard in its slim form (the end step reads the whole ones from
    ``OUT/scorecards``), and what is missing or invalid."""
    cards: dict[str, AnyCard] = {}
    missing, invalid = [], []
    for part in parts:
        for student in part.doc["students"]:
            path = part.path.parent / card_name(student)
            try:
                text = path.read_text("utf-8")
            except OSError:
                missing.append(f"{student['key']} ({part.label}: no {path})")
                continue
            card, problem = _parsed(text, part.doc)
            if problem:
                invalid.append(
                    f"{path} ({student['key']}, shard {part.doc['shard']['index']}): {problem}"
                )
            else:
                cards[student["key"]] = scorecard.slim(card)
    problems = (
        [names(f"{len(missing)} student(s) without a scorecard: ", missing)] if missing else []
    )
    if invalid:
        problems.append(names(f"{len(invalid)} scorecard(s) unusable ({REGRADE}): ", invalid))
    return cards, problems


def _parsed(text: str, doc: dict[str, Any]) -> tuple[AnyCard, str]:
    """The scorecard in ``text``, and why it cannot be merged under ``doc`` ("" when it can)."""
    try:
        card: AnyCard = json.loads(text)
        schema.validate("scorecard", card)
    except ValueError as exc:
        return {}, f"not a valid scorecard ({exc})"
    if (
        card["assignment"] != doc["assignment"]
        or card["grader"]["version"] != doc["grader"]["version"]
    ):
        return card, (
            f"graded for {card['assignment']} by grader {card['grader']['version']}, not for "
            f"{doc['assignment']} by {doc['grader']['version']} as its shard says"
        )
    return card, ""


def _describe(problems: list[str], parts: list[Part]) -> str:
    return f"cannot merge {len(parts)} shard output(s), nothing written:\n" + "\n".join(
        f"  - {p}" for p in problems
    )


def _copy_cards(parts: list[Part], out: Path) -> None:
    """Each scorecard into ``out/scorecards`` as written (unless the shard wrote there already)."""
    for part in parts:
        for student in part.doc["students"]:
            source, dest = (
                part.path.parent / card_name(student),
                out / card_name(student),
            )
            if dest.exists() and os.path.samefile(source, dest):
                continue
            outputs.write_text(dest, source.read_text("utf-8"))


def combined(parts: list[Part], cards: dict[str, AnyCard]) -> Run:
    """One :class:`Run` as if a single machine had graded the class: class order, every shard's
    figures."""
    students = sorted((s for p in parts for s in p.doc["students"]), key=lambda s: s["order"])
    figures = {r["key"]: r for p in parts for r in p.doc["run"]["results"]}
    results = [_result(s["key"], cards[s["key"]], figures.get(s["key"], {})) for s in students]
    runs = [p.doc["run"] for p in parts]
    backend = min(
        (r["isolation"] for r in runs), key=_rank
    )  # the class was graded at least this strongly
    records = [p.doc["canary"]["record"] for p in parts if p.doc["canary"]["record"]]
    meta = {
        "slot_starts": sum(r["slot_starts"] for r in runs),
        "slot_deaths": sum(r["slot_deaths"] for r in runs),
        "canary": records[0] if records else None,
    }
    return Run(results, backend, sum(r["slots"] for r in runs), _wall_s(parts), meta=meta)


def _result(key: str, card: AnyCard, figures: dict[str, Any]) -> Result:
    entry = Entry(
        key,
        card["submission"].get("student", key),
        Path(card["submission"]["path"]),
        card["submission"].get("layout", "unknown"),
    )
    return Result(
        entry,
        card,
        wall_s=figures.get("wall_s", 0.0),
        warm=figures.get("warm", False),
        skipped=figures.get("skipped", False),
    )


def _rank(backend: str) -> int:
    return LEVELS.index(backend) if backend in LEVELS else -1  # inprocess: weaker than any sandbox


def _wall_s(parts: list[Part]) -> float:
    """From the first shard's start to the last one's end: the class's wall time, however the shards
    ran."""
    starts = [datetime.fromisoformat(p.doc["started"]) for p in parts]
    ends = [datetime.fromisoformat(p.doc["finished"]) for p in parts]
    return round(max(0.0, (max(ends) - min(starts)).total_seconds()), 3)
