"""``grader batch --shard K/N``: grade one shard of a class and leave a manifest for ``grader
merge``.

A shard discovers the whole class (so every shard sees, and records, the same class), grades only
its own part through the same engine as a single-machine batch (scorecards written atomically as
they are ready, resumable, Ctrl-C keeps what is finished), and writes ``shard-K-of-N.json`` (schema
``shard``) beside them twice: when it starts (its responsibilities) and when it ends (the run's
figures). The gradebook, summary, report and exports are left to ``grader merge``, so N shards may
share one ``--out`` folder on a shared file system as well as use one each.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader import __version__, schema
from grader import fingerprint as grading_fingerprint
from grader.batch import engine
from grader.batch.progress import Progress
from grader.cluster.shard import PARTITION, Shard
from grader.course import manifest
from grader.exports import outputs
from grader.intake import classfolder as disc
from grader.scoring import scorecard


@dataclass
class ShardOutcome:
    run: engine.Run
    manifest: Path
    document: dict[str, Any]
    total: int  # submissions in the whole class

    def error_kinds(self) -> dict[str, int]:
        """How many of this shard's submissions ended in an error, by kind."""
        return self.run.error_kinds()


def manifest_name(shard: Shard) -> str:
    return f"shard-{shard.index}-of-{shard.count}.json"


def grade_shard(
    submissions: Path | str,
    *,
    out: Path | str,
    options: engine.Options,
    shard: Shard,
    progress: Progress | None = None,
) -> ShardOutcome:
    """Grade the part of ``submissions`` that falls in ``shard`` into ``out`` (see the module
    docstring)."""
    out = Path(out)
    # once for the whole command: discovery, the engine, the canary and the summary
    assignment = options.load()
    found = disc.discover(submissions, assignment=assignment.id)
    entries = [
        e for e in found.entries if os.path.abspath(e.path) != os.path.abspath(out)
    ]  # never our --out
    if not entries:
        raise disc.DiscoveryError(
            f"{submissions}: no submissions found (expected per-student folders, archives, "
            ".py or .ipynb files, nbgrader's submitted/ or a Classroom clone)"
        )
    for exercise_id in options.exercises or ():
        assignment.exercise(exercise_id)  # an unknown id is refused before a manifest is written
    mine = shard.select(entries)
    doc = started(entries, mine, found, assignment=assignment, options=options, shard=shard)
    path = out / manifest_name(shard)
    write(path, doc)
    progress = progress or Progress()
    with progress:
        run = engine.run(
            mine,
            out=out,
            options=options,
            assignment=assignment,
            on_result=progress.update,
            on_plan=progress.plan,
            on_phase=progress.say,
        )
    doc = finished(doc, run)
    write(path, doc)
    return ShardOutcome(run, path, doc, len(entries))


def started(
    entries: list[disc.Entry],
    mine: list[disc.Entry],
    found: disc.Discovery,
    *,
    assignment: manifest.Assignment,
    options: engine.Options,
    shard: Shard,
) -> dict[str, Any]:
    """The manifest as the shard starts: who it is responsible for, and what it grades with."""
    order = {e.key: n for n, e in enumerate(entries)}
    return {
        "schema_version": 1,
        "grader": {"version": __version__},
        "assignment": assignment.id,
        "exercises": list(options.exercises or assignment.ids()),
        "seed": options.seed,
        "shard": {
            "index": shard.index,
            "count": shard.count,
            "source": shard.source,
            "partition": PARTITION,
        },
        "fingerprint": fingerprint(assignment),
        "canary": {"required": options.canary, "record": None},
        "class": {
            "submissions": len(entries),
            "sha256": class_digest([e.key for e in entries]),
            "layout": found.layout,
            "ignored": list(found.ignored),
        },
        "students": [
            {"key": e.key, "order": order[e.key], "scorecard": f"scorecards/{e.key}.json"}
            for e in mine
        ],
        "state": "started",
        "started": scorecard.now(),
        "finished": None,
        "run": None,
    }


def finished(doc: dict[str, Any], run: engine.Run) -> dict[str, Any]:
    """``doc`` once the shard's engine run is over: the canary it gave and the run's figures."""
    results = [
        {"key": r.entry.key, "wall_s": round(r.wall_s, 4), "warm": r.warm, "skipped": r.skipped}
        for r in run.results
    ]
    figures = {
        "isolation": run.backend,
        "slots": run.slots,
        "wall_s": run.wall_s,
        "slot_starts": run.meta.get("slot_starts", 0),
        "slot_deaths": run.meta.get("slot_deaths", 0),
        "results": results,
    }
    return {
        **doc,
        "canary": {**doc["canary"], "record": run.meta.get("canary")},
        "state": "finished",
        "finished": scorecard.now(),
        "run": figures,
    }


def write(path: Path, doc: dict[str, Any]) -> None:
    """Validate, then write atomically (a reader never sees half a manifest)."""
    schema.validate("shard", doc)
    outputs.write_text(path, json.dumps(doc, indent=2) + "\n")


def class_digest(keys: list[str]) -> str:
    """One hash of the whole class's keys in class order: equal on every shard that saw the same
    class."""
    return hashlib.sha256(
        "".join(f"{k}\n" for k in keys).encode("utf-8", "surrogatepass")
    ).hexdigest()


def fingerprint(assignment: manifest.Assignment) -> str:
    """sha256 of the files a grade and the canary's proof depend on, named by relative path (the
    checkout may sit elsewhere on each machine): :func:`grader.fingerprint.inputs_digest`, the one
    list of them."""
    return grading_fingerprint.inputs_digest(assignment)
