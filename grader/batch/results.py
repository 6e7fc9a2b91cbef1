"""What a batch is asked to do and what it gives back: options, per-submission results, the run."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from grader.cardtypes import AnyCard
from grader.errors import GraderFault
from grader.intake.classfolder import Entry
from grader.options import GradeOptions
from grader.sandbox.levels import BackendName


class BatchFault(GraderFault):
    """The engine itself cannot go on (slots cannot start): a grader fault."""


class BatchInterrupted(KeyboardInterrupt):
    """Ctrl-C: every finished scorecard is on disk; a rerun resumes."""


@dataclass(frozen=True, kw_only=True)
class Options(GradeOptions):
    """A batch's options: how every submission is graded (:class:`GradeOptions`, one seed for all
    when ``seed`` is given), and the batch's own."""

    jobs: int | None = None  # parallel grading slots (None: one per core)
    force: bool = False  # regrade submissions whose scorecard is up to date
    warm: str = "fork"  # fork (zygote) | start (pre-started workers) | off (cold, for measurements)


@dataclass
class Result:
    """One submission's outcome. ``card`` is the whole scorecard while it is delivered (the engine's
    ``on_result``); the run then keeps its slim form (:func:`grader.scoring.scorecard.slim`), and
    the whole card is read from disk (:class:`grader.batch.cards.Shelf`)."""

    entry: Entry
    card: AnyCard
    wall_s: float = 0.0
    warm: bool = False
    skipped: bool = False
    # what the grading place records once the card is on disk (a cluster's log line): never for a
    # result whose card an interruption kept from being written
    recorded: Callable[[], None] | None = field(default=None, repr=False, compare=False)

    @property
    def grader_error(self) -> bool:
        return self.card["status"] == "error" and (self.card["error"] or {}).get("kind") == "grader"


@dataclass
class Run:
    results: list[Result]
    backend: BackendName
    slots: int
    wall_s: float
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def graded(self) -> list[Result]:
        return [r for r in self.results if not r.skipped]

    def error_kinds(self) -> dict[str, int]:
        """How many submissions ended in an error, by kind (grader, intake, isolation, ...)."""
        kinds: dict[str, int] = {}
        for r in self.results:
            if r.card["status"] == "error":
                kind = (r.card.get("error") or {}).get("kind", "grader")
                kinds[kind] = kinds.get(kind, 0) + 1
        return kinds


@contextlib.contextmanager
def uninterrupted() -> Iterator[None]:
    """Ctrl-C and SIGTERM held back meanwhile and delivered after (a result in hand is written and
    recorded, never one without the other); as is off the main thread. By handlers, not a signal
    mask: the kernel gives a process's signal to any thread that does not block it (Dask's, say)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum: int, frame: object) -> None:
        held.append(signum)
        if len(held) > 1:  # a second one: whoever sends it means it (a write that hangs, say)
            raise KeyboardInterrupt

    before = {s: signal.signal(s, hold) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        if len(held) == 1:  # (a second one has raised already)
            signal.raise_signal(held[0])  # to the handler in place again: Ctrl-C's, SIGTERM's
