"""What a batch is asked to do and what it gives back: options, per-submission results, the run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from grader import manifest
from grader.batch.discover import Entry
from grader.errors import GraderFault


class BatchFault(GraderFault):
    """The engine itself cannot go on (slots cannot start): a grader fault."""


class BatchInterrupted(KeyboardInterrupt):
    """Ctrl-C: every finished scorecard is on disk; a rerun resumes."""


@dataclass
class Options:
    assignment: str = manifest.DEFAULT_ASSIGNMENT
    isolation: str = "auto"
    require_isolation: str | None = None
    jobs: int | None = None
    threads: int = 1
    force: bool = False
    exercises: list[str] | None = None
    per_test_time_limit: float | None = None
    warm: str = "fork"  # fork (zygote) | start (pre-started workers) | off (cold, for measurements)
    seed: int | None = None
    canary: bool = True  # prove on the reference solutions and the stubs first (False: the project's tests only)


@dataclass
class Result:
    entry: Entry
    card: dict[str, Any]
    wall_s: float = 0.0
    warm: bool = False
    skipped: bool = False

    @property
    def grader_error(self) -> bool:
        return self.card["status"] == "error" and (self.card["error"] or {}).get("kind") == "grader"


@dataclass
class Run:
    results: list[Result]
    backend: str
    slots: int
    wall_s: float
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def graded(self) -> list[Result]:
        return [r for r in self.results if not r.skipped]
