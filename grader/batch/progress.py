"""Progress for a batch: a rich bar (counts, ETA, failures as they happen) on a terminal, else one
line each."""

from __future__ import annotations

import sys
from typing import IO, Any

from grader import safetext
from grader.batch.engine import Result
from grader.cardtypes import error_of


def describe(result: Result) -> str:
    """One line: every student-influenced part goes through ``safetext.name`` (a newline cannot
    forge a line)."""
    card = result.card
    who = safetext.name(result.entry.key)
    if result.skipped:
        return f"{who}: unchanged, kept ({card['score']:g}/{card['max_score']:g})"
    if card["status"] == "error":
        error = error_of(card)
        return (
            f"{who}: ERROR ({safetext.name(error['kind'])}): {safetext.name(error['message'], 160)}"
        )
    timeouts = sum(1 for i in card["incidents"] if i["kind"] == "timeout")
    extra = f", {timeouts} timeout(s)" if timeouts else ""
    return f"{who}: {card['score']:g}/{card['max_score']:g} in {card['timings']['total_s']:.1f} s{extra}"


class Progress:
    """Use as a context manager; ``plan(total, skipped)`` then ``update(result)`` per submission."""

    def __init__(self, stream: IO[str] | None = None, *, rich: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.rich = self.stream.isatty() if rich is None else rich
        self.total = self.count = self.failures = 0
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> Progress:
        if self.rich:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as Bar

            console = Console(file=self.stream)
            self._bar = Bar(
                TextColumn("[bold]grading"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("[red]{task.fields[failures]} failed"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=console,
                transient=False,
            )
            self._bar.__enter__()
            self._task = self._bar.add_task("grading", total=None, failures=0)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)

    def plan(self, total: int, skipped: int, stale: dict[str, int] | None = None) -> None:
        """What the run will do: ``skipped`` scorecards kept, and the earlier ones ``stale``
        regrades, by reason."""
        self.total = total
        if self._bar is not None:
            self._bar.update(self._task, total=total)
        line = plan_line(total, skipped, stale or {})
        if line:
            self.say(line)

    def say(self, line: str) -> None:
        """One line about what is happening between results, on a terminal (above the bar) and off
        it (flushed at once: a CI log shows it while the step runs)."""
        if self._bar is not None:
            self._bar.console.print(_escape(safetext.name(line, 1000)))
        else:
            print(safetext.name(line, 1000), file=self.stream, flush=True)

    def update(self, result: Result) -> None:
        self.count += 1
        failed = result.card["status"] == "error"
        self.failures += failed
        line = f"[{self.count}/{self.total}] {describe(result)}"
        if self._bar is not None:
            self._bar.update(self._task, advance=1, failures=self.failures)
            if failed or any(i["kind"] == "timeout" for i in result.card["incidents"]):
                self._bar.console.print(f"[{'red' if failed else 'yellow'}]{_escape(line)}")
        else:
            print(line, file=self.stream, flush=True)


def plan_line(total: int, skipped: int, stale: dict[str, int]) -> str:
    """``12 submissions: 3 unchanged since the last run; 9 earlier scorecards graded again: the
    hidden suites changed (9)``; ``stale`` counts earlier scorecards by their reasons, ``+``-joined
    keys of :data:`grader.batch.cards.REASONS`."""
    from grader.batch.cards import REASONS

    parts = [f"{skipped} unchanged since the last run"] if skipped else []
    if stale:
        why = "; ".join(
            f"{' and '.join(REASONS.get(k, k) for k in key.split('+'))} ({n})"
            for key, n in sorted(stale.items(), key=lambda kv: (-kv[1], kv[0]))
        )
        parts.append(f"{sum(stale.values())} earlier scorecard(s) graded again: {why}")
    return f"{total} submissions: {'; '.join(parts)}" if parts else ""


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)
