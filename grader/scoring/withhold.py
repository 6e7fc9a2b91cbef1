"""What an integrity finding costs: only ``withhold`` findings cost anything, and only the exercise
they belong to.

- A ``withhold`` finding of the scan (:mod:`grader.scoring.integrity`) withholds the exercise whose
  own file has it. A helper module (a file that is no exercise's module) belongs to every exercise
  whose own file imports it, directly or through other helpers: its code runs as part of theirs, and
  there is no other exercise to charge. Another exercise's module is not followed: importing
  ``CausalAttention`` does not make ``causal_attention.py`` the multi-head exercise's own file (that
  exercise is graded with stand-ins for it anyway). A one-file submission is every exercise's own
  file.
- A ``banned-api`` finding (:mod:`grader.scoring.banned`) withholds the exercise whose ban it
  breaks.
- A ``review`` finding costs nothing: it is listed on the scorecard and in the class report as
  "needs review".

A withheld exercise keeps its tests (they are shown); its score is 0 and the scorecard says why.
"""

from __future__ import annotations

import ast
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader import forked
from grader.cardtypes import Scorecard
from grader.course import manifest
from grader.scoring import banned, integrity
from grader.scoring.points import ExerciseScore, withhold


@dataclass
class Review:
    findings: list[integrity.Finding] = field(default_factory=list)
    withheld: dict[str, str] = field(default_factory=dict)  # exercise id -> reason
    seconds: float = 0.0

    def to_list(self) -> list[dict[str, object]]:
        return [f.to_dict() for f in self.findings]

    @property
    def needs_review(self) -> list[integrity.Finding]:
        return [f for f in self.findings if f.severity == integrity.REVIEW]

    def to_plain(self) -> dict[str, Any]:
        """Everything of it as JSON values, the findings' own fields unchanged (a forked copy's
        review comes back this way)."""
        findings = [[f.file, f.line, f.construct, f.rule, list(f.exercises)] for f in self.findings]
        return {"findings": findings, "withheld": self.withheld, "seconds": self.seconds}

    @classmethod
    def from_plain(cls, plain: dict[str, Any]) -> Review:
        findings = [
            integrity.Finding(str(file), int(line), str(construct), str(rule), tuple(exercises))
            for file, line, construct, rule, exercises in plain["findings"]
        ]
        withheld = {str(k): str(v) for k, v in plain["withheld"].items()}
        return cls(findings, withheld, float(plain["seconds"]))


class Pending:
    """A review being made in a forked copy of this process while the tests run (:func:`begin`)."""

    def __init__(self, copy: forked.Forked | None, make: Callable[[], Review]) -> None:
        self.copy, self._make = copy, make

    def verdict(self) -> Review:
        """The copy's review; made here if there was no copy or it failed (a review that raises
        raises here as well, as it would have without a copy)."""
        copy, self.copy = self.copy, None
        if copy is not None:
            try:
                return Review.from_plain(copy.result())
            except (forked.ForkedFault, KeyError, TypeError, ValueError):
                pass
        return self._make()

    def __enter__(self) -> Pending:
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop and reap a copy whose review was not asked for (Ctrl-C, a grader fault)."""
        copy, self.copy = self.copy, None
        if copy is not None:
            copy.cancel()


def begin(
    box: Path, assignment: manifest.Assignment, single_module: str | None, *, beside: bool
) -> Pending:
    """:func:`review`, made beside the tests in a forked copy where ``beside`` and this machine has
    a core to spare (about 0.1 s of a ``grader grade`` that a student or an instructor waits for);
    else when :meth:`Pending.verdict` asks for it. The review reads only the staged files, which
    nothing changes meanwhile: the same verdict either way."""

    def make() -> Review:
        return review(box, assignment, single_module)

    spare = beside and len(os.sched_getaffinity(0)) > 1
    return Pending(forked.start(lambda: make().to_plain()) if spare else None, make)


def review(box: Path, assignment: manifest.Assignment, single_module: str | None = None) -> Review:
    """Scan the staged submission and decide which exercises lose their points (nothing runs)."""
    t0 = time.perf_counter()
    parsed = integrity.parse_box(box)
    owners = _owners(parsed, assignment, single_module)
    found = [
        f.attributed(owners.get(Path(f.file).stem, ())) if f.severity == integrity.WITHHOLD else f
        for p in parsed.values()
        for f in integrity.scan(p)
    ]
    found += banned.findings(parsed, assignment, single_module)
    found.sort(key=lambda f: (f.file, f.line, f.rule))
    withheld: dict[str, str] = {}
    for exercise in assignment.ids():
        hits = [f for f in found if exercise in f.exercises]
        if hits:
            withheld[exercise] = _reason(hits)
    return Review(found, withheld, round(time.perf_counter() - t0, 4))


def apply(scores: list[ExerciseScore], verdict: Review) -> None:
    for score in scores:
        if score.id in verdict.withheld:
            withhold(score, verdict.withheld[score.id])


def annotate(card: Scorecard, verdict: Review) -> None:
    """Scorecard fields: ``integrity`` (every finding, with its severity) and, per withheld
    exercise, ``withheld`` and 0 points."""
    card["integrity"] = verdict.to_list()
    card["timings"]["integrity_s"] = verdict.seconds
    for entry in card["exercises"]:
        reason = verdict.withheld.get(entry["id"])
        if reason is None:
            continue
        entry.update({"withheld": reason, "score": 0.0})
        for test in entry["tests"]:  # exports sum per-test points: they must not count either
            if test["points"]:
                test["message"] = f"points withheld: {reason}" + (
                    f"\n{test['message']}" if test["message"] else ""
                )
            test["points"] = 0.0
    card["score"] = round(sum(e["score"] for e in card["exercises"]), 6)


def _reason(hits: list[integrity.Finding]) -> str:
    first = hits[0].to_dict()  # sanitised: file names and constructs are the student's text
    more = f" (and {len(hits) - 1} more)" if len(hits) > 1 else ""
    return f"integrity finding: {first['file']} line {first['line']}: {first['construct']} ({first['rule']}){more}"


def _owners(
    parsed: dict[str, integrity.Parsed], assignment: manifest.Assignment, single_module: str | None
) -> dict[str, tuple[str, ...]]:
    """Module stem -> the exercises whose own code it is (see the module docstring)."""
    by_module: dict[str, list[str]] = {}
    for exercise in assignment.exercises:
        by_module.setdefault(single_module or exercise.module, []).append(exercise.id)
    graph = {
        stem: _imports(p.tree, set(parsed)) if p.tree is not None else set()
        for stem, p in parsed.items()
    }
    owners: dict[str, list[str]] = {}
    for module, exercises in by_module.items():
        seen, todo = {module}, [module]
        while todo:  # the module itself, then the helpers it imports, through helpers only
            for nxt in graph.get(todo.pop(), set()) - seen - by_module.keys():
                seen.add(nxt)
                todo.append(nxt)
        for stem in seen:
            owners.setdefault(stem, []).extend(exercises)
    return {stem: tuple(dict.fromkeys(ids)) for stem, ids in owners.items()}


def _imports(tree: ast.Module, stems: set[str]) -> set[str]:
    """Submission modules a module imports: ``from .x import``, ``from . import x``, ``import
    x``."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            head = (node.module or "").split(".")[0]
            found |= {head} if head else {a.name for a in node.names}
    return found & stems
