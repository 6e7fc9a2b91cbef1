"""Whether shard outputs belong together: every reason a set of shard manifests cannot be merged.

Kept apart from :mod:`grader.cluster.merge` (which finds the manifests, reads the scorecards and
writes the merged run): these are the pure checks on the manifests, each naming what is wrong and
what to do, so the merge can refuse with every problem at once before it writes anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.cluster.shard import shard_of
from grader.cluster.shard_job import class_digest

AGREE = (
    "grader version",
    "assignment",
    "exercises",
    "seed",
    "canary",
    "grading inputs",
    "class",
    "shard count",
)
SHOWN = 12  # names listed per problem before "and N more"


@dataclass
class Part:
    """One shard manifest and the folder its scorecard paths are relative to."""

    path: Path
    doc: dict[str, Any]

    @property
    def label(self) -> str:
        return f"shard {self.doc['shard']['index']}/{self.doc['shard']['count']} ({self.path})"


def check(parts: list[Part]) -> list[str]:
    """Every reason ``parts`` cannot be merged (empty when they can)."""
    problems = [_mixed(name, parts) for name in AGREE]
    problems += _unfinished(parts) + _missing_shards(parts) + _misplaced(parts) + _duplicates(parts)
    problems = [p for p in problems if p]
    return problems or [
        p for p in [check_classes(parts)] if p
    ]  # a mismatch any problem above would explain


def _facet(name: str, doc: dict[str, Any]) -> object:
    """What every shard must agree on, by name (``canary``: whether it was required and what it
    proved)."""
    record = doc["canary"]["record"] or {}
    return {
        "grader version": doc["grader"]["version"],
        "assignment": doc["assignment"],
        "exercises": ",".join(doc["exercises"]),
        "seed": doc["seed"],
        "canary": (
            doc["canary"]["required"],
            record.get("solutions"),
            record.get("stubs"),
            record.get("max_score"),
        ),
        "grading inputs": doc["fingerprint"],
        "class": (doc["class"]["submissions"], doc["class"]["sha256"]),
        "shard count": doc["shard"]["count"],
    }[name]


def _mixed(name: str, parts: list[Part]) -> str:
    values: dict[str, list[str]] = {}
    for part in parts:
        if (
            name == "canary"
            and part.doc["canary"]["required"]
            and part.doc["canary"]["record"] is None
        ):
            # required but not run (nobody to grade, or unfinished, said apart): nothing to compare
            continue
        values.setdefault(repr(_facet(name, part.doc)), []).append(part.label)
    if len(values) < 2:
        return ""
    listed = "; ".join(f"{value} in {', '.join(labels)}" for value, labels in values.items())
    return f"mixed {name}: {listed}; grade every shard with the same grader, checkout and options"


def _unfinished(parts: list[Part]) -> list[str]:
    return [
        f"{p.label} did not finish: rerun the same command (it resumes) and merge again"
        for p in parts
        if p.doc["state"] != "finished"
    ]


def _missing_shards(parts: list[Part]) -> list[str]:
    counts = {p.doc["shard"]["count"] for p in parts}
    if len(counts) != 1:
        return []  # already reported as mixed shard counts
    [count] = counts
    absent = sorted(set(range(1, count + 1)) - {p.doc["shard"]["index"] for p in parts})
    return [
        f"shard {k} of {count} is missing (no shard-{k}-of-{count}.json in the folders given): run "
        f"grader batch --shard {k}/{count} and merge again"
        for k in absent
    ]


def _misplaced(parts: list[Part]) -> list[str]:
    """Keys a manifest claims that its shard does not own (a manifest from another split, or
    edited)."""
    wrong = [
        f"{s['key']} ({p.label})"
        for p in parts
        for s in p.doc["students"]
        if shard_of(s["key"], p.doc["shard"]["count"]) != p.doc["shard"]["index"]
        or s["scorecard"] != card_name(s)
    ]
    return (
        [names(f"{len(wrong)} student(s) listed by a shard that does not own them: ", wrong)]
        if wrong
        else []
    )


def _duplicates(parts: list[Part]) -> list[str]:
    """Students listed by more than one manifest, grouped by the manifests that list them."""
    owners: dict[str, list[str]] = {}
    for part in parts:
        for student in part.doc["students"]:
            owners.setdefault(student["key"], []).append(part.label)
    groups: dict[tuple[str, ...], list[str]] = {}
    for key, labels in owners.items():
        if len(labels) > 1:
            groups.setdefault(tuple(labels), []).append(key)
    return [
        names(
            f"{len(keys)} student(s) graded by more than one shard ({' and '.join(labels)}; keep one of "
            "them): ",
            keys,
        )
        for labels, keys in groups.items()
    ]


def card_name(student: dict[str, Any]) -> str:
    """Where a manifest's student has its scorecard, relative to the manifest's folder."""
    return f"scorecards/{student['key']}.json"


def names(head: str, items: list[str]) -> str:
    """``head`` and the first SHOWN of ``items``, then how many more: one problem line."""
    more = f", and {len(items) - SHOWN} more" if len(items) > SHOWN else ""
    return head + ", ".join(items[:SHOWN]) + more


def check_classes(parts: list[Part]) -> str:
    """The union of the shards' students is the class they all saw ("" when it is)."""
    students = sorted((s for p in parts for s in p.doc["students"]), key=lambda s: s["order"])
    if class_digest([s["key"] for s in students]) == parts[0].doc["class"]["sha256"]:
        return ""
    return (
        f"the shards list {len(students)} student(s) but the class they saw had "
        f"{parts[0].doc['class']['submissions']}: a manifest was edited or comes from another class"
    )
