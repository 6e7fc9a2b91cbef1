"""Per-student rows and class-wide mistakes for ``summary.json`` and the report.

A row holds what an instructor acts on for one student: points per exercise, status, flags
(timeouts, integrity findings, withheld exercises, an identical-submission group, errors, a roster
mismatch) and the failing tests with their messages (the drill-down), counting the tests a student
tried and failed apart from those of work not submitted (a stub, a missing file or name). Common
mistakes are grouped by what was misunderstood: the ``diagnosis [id]`` tag in a test's message (a
misconception id, where the suites give one) or else the test (its name without parameters) and its
message's first line with numbers masked; each group is counted by distinct students, its hint shown
in full. Absent work is left out there: it says nothing about a misconception. Every string here
comes from a card that :func:`grader.exports.outputs.clean_tree` has already made safe text.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from grader.cardtypes import AnyCard, ExerciseEntry, TestEntry, error_of
from grader.gradetext import diagnosed, split_message

Named = list[tuple[str, AnyCard]]
MESSAGE_CHARS = 600  # per failing test in the summary; the scorecard keeps the full message
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?", re.IGNORECASE)
_ABSENT = re.compile(
    r"is not implemented yet|not found in the submission|not found in \S+\.py: define it"
    r"|earlier tests of this exercise timed out"
)  # the timeout itself is counted, once


HINT_CHARS = 2000
_PARAMS = re.compile(r"\[.*\]$")


def failure_key(message: str) -> str:
    """A message's first line with numbers as ``#``: one key for the same mistake on other
    inputs."""
    first = message.strip().splitlines()[0] if message.strip() else "(no message)"
    return _NUMBER.sub("#", first)[:240]


def mistake_key(exercise: str, test: TestEntry) -> tuple[str, dict[str, Any]]:
    """The group a failing test belongs to, and what the report shows of it. With a ``diagnosis
    [id]: `` tag in its message (how the suites name a misconception:
    :func:`grader.gradetext.diagnosed`) that is the key; else the test without its parameters and
    :func:`failure_key` of its message. The one place the grouping is decided."""
    head, hint = split_message(test["message"])
    shown = {
        "test": f"{exercise}::{_PARAMS.sub('', test['name'])}",
        "message": failure_key(head),
        "hint": (hint or "")[:HINT_CHARS],
    }
    diagnosis = diagnosed(test)
    if diagnosis:
        return f"diagnosis:{diagnosis}", {**shown, "diagnosis": diagnosis}
    return f"{shown['test']}\0{shown['message']}", shown


def is_absent(message: str) -> bool:
    """The test failed because the work is not there (a stub, a missing file or name) or was never
    run."""
    return bool(_ABSENT.search(message))


def _failing(card: AnyCard) -> list[dict[str, Any]]:
    return [
        {
            "exercise": ex["id"],
            "test": t["name"],
            "outcome": t["outcome"],
            "message": t["message"][:MESSAGE_CHARS],
        }
        for ex, t in _failed_tests(card)
    ]


def _failed_tests(card: AnyCard) -> list[tuple[ExerciseEntry, TestEntry]]:
    """(exercise, test) of every counted test that did not pass."""
    return [
        (ex, t)
        for ex in card["exercises"]
        for t in ex["tests"]
        if t["counted"] and t["outcome"] not in ("passed", "skipped")
    ]


def _drill_down(failing: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each real failure, and one line per exercise for its absent work (``N tests``: not 40 copies
    of a stub)."""
    out: list[dict[str, Any]] = []
    absent: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for failure in failing:
        (absent[failure["exercise"]] if is_absent(failure["message"]) else out).append(failure)
    for tests in absent.values():
        out.append({**tests[0], "test": f"{len(tests)} test(s), e.g. {tests[0]['test']}"})
    return out


def _flags(card: AnyCard) -> list[str]:
    timeouts = sum(i["kind"] == "timeout" for i in card["incidents"])
    flags = [f"error: {error_of(card)['kind']}"] if card["status"] == "error" else []
    flags += [f"{timeouts} timeout(s)"] if timeouts else []
    flags += sorted({f"{i['kind']}" for i in card["incidents"] if i["kind"] != "timeout"})
    proofs = sum(f["severity"] == "withhold" for f in card.get("integrity", []))
    reviews = len(card.get("integrity", [])) - proofs
    flags += [f"integrity: {proofs} finding(s)"] if proofs else []
    flags += [f"needs review: {reviews}"] if reviews else []
    flags += [f"withheld: {ex['id']}" for ex in card["exercises"] if ex.get("withheld")]
    flags += [f"capped: {ex['id']}" for ex in card["exercises"] if ex.get("capped")]
    return flags


def row(
    key: str, card: AnyCard, exercise_ids: list[str], group: int | None = None
) -> dict[str, Any]:
    """One student's row (schema ``summary``, ``students[]``); ``group``: its identical-submission
    group."""
    points = {ex["id"]: ex["score"] for ex in card["exercises"]}
    error, failing = card.get("error") or None, _failing(card)
    return {
        "key": key,
        "student": card["submission"].get("student") or key,
        "status": card["status"],
        "total": card["score"],
        "max_score": card["max_score"],
        "exercises": {ex: points.get(ex, 0) for ex in exercise_ids},
        "flags": _flags(card) + ([f"identical #{group}"] if group is not None else []),
        "identical_group": group,
        "error": {"kind": error["kind"], "message": error["message"][:MESSAGE_CHARS]}
        if error
        else None,
        "integrity": [
            {k: f[k] for k in ("file", "line", "construct", "rule", "severity", "reason")}
            for f in sorted(card.get("integrity", []), key=lambda f: f["severity"] != "withhold")
        ][:20],
        "withheld": [
            {"exercise": ex["id"], "reason": ex["withheld"][:MESSAGE_CHARS]}
            for ex in card["exercises"]
            if ex.get("withheld")
        ],
        "incidents": [
            {"kind": i["kind"], "test": i["test"], "message": i["message"][:MESSAGE_CHARS]}
            for i in card["incidents"]
        ][:20],
        "failed_tests": len(failing),
        "failing": _drill_down(failing),
        "tried_failed": sum(not is_absent(f["message"]) for f in failing),
        "not_submitted": sum(is_absent(f["message"]) for f in failing),
    }


def missing_row(
    key: str, student: str, exercise_ids: list[str], max_score: float
) -> dict[str, Any]:
    """A roster student with no submission: 0 points, status ``missing``."""
    return {
        "key": key,
        "student": student,
        "status": "missing",
        "total": 0,
        "max_score": max_score,
        "exercises": {ex: 0 for ex in exercise_ids},
        "flags": ["no submission"],
        "identical_group": None,
        "error": None,
        "integrity": [],
        "withheld": [],
        "incidents": [],
        "failed_tests": 0,
        "failing": [],
        "tried_failed": 0,
        "not_submitted": 0,
    }


def rows(
    named: Named, exercise_ids: list[str], identical: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Every student's row, in key order; ``identical`` numbers the groups (1, 2, ...)."""
    return grouped([row(key, card, exercise_ids) for key, card in named], identical)


def grouped(rows: list[dict[str, Any]], identical: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` in key order, each in an identical-submission group numbered (1, 2, ...) and
    flagged."""
    group = {key: n for n, g in enumerate(identical, 1) for key in g["students"]}
    out = []
    for r in sorted(rows, key=lambda r: r["key"]):
        n = group.get(r["key"])
        out.append(
            r
            if n is None
            else {**r, "identical_group": n, "flags": [*r["flags"], f"identical #{n}"]}
        )
    return out


def common_mistakes(named: Named, top: int = 15) -> list[dict[str, Any]]:
    """Mistakes (:func:`mistake_key`) by the number of distinct students who made them (absent work
    left out)."""
    mistakes = Mistakes()
    for key, card in named:
        if card["status"] == "graded":
            mistakes.add(key, card)
    return mistakes.ranked(top)


@dataclass
class Mistakes:
    """The class's mistakes so far: who made each, in how many tests, in which exercises, and how it
    is shown."""

    students: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    tests: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    where: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    shown: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, key: str, card: AnyCard) -> None:
        """One graded card's failing tests (absent work left out)."""
        for exercise, test in _failed_tests(card):
            if is_absent(test["message"]):
                continue
            group, shown_as = mistake_key(exercise["id"], test)
            self.shown.setdefault(group, shown_as)
            self.students[group].add(key)
            self.tests[group] += 1
            self.where[group].add(exercise["id"])

    def ranked(self, top: int = 15) -> list[dict[str, Any]]:
        """The ``top`` mistakes by distinct students, then by tests, then by key."""
        ranked = sorted(self.students, key=lambda g: (-len(self.students[g]), -self.tests[g], g))
        return [
            {
                **self.shown[g],
                "count": len(self.students[g]),
                "tests": self.tests[g],
                "exercises": sorted(self.where[g]),
                "students": sorted(self.students[g])[:8],
            }
            for g in ranked[:top]
        ]
