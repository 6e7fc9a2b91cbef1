"""What every batch-like command (``batch``, ``batch --dask``, ``batch --shard``, ``merge``,
``export``) shares: the export formats, the roster option, and the closing lines and exit codes.

Kept apart so the command modules import it and never each other (no cycle: test_layers).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader.errors import ExitCode, UsageError

if TYPE_CHECKING:
    from grader.batch.job import Outcome

FORMATS = ("gradescope", "github-classroom", "csv", "canvas", "moodle")


def interrupted(exc: BaseException, out: str) -> int:
    print(
        f"grader: interrupted ({exc}); finished scorecards are kept in {Path(out) / 'scorecards'}; "
        "rerun the same command to resume",
        file=sys.stderr,
    )
    return ExitCode.INTERRUPTED


def finished(outcome: Outcome) -> int:
    """The closing line of ``grader batch`` (also ``--dask``); the exit code."""
    s = outcome.summary
    print(
        f"{s['counts']['submissions']} submissions: {s['counts']['graded']} graded, {s['counts']['errors']} errors, "
        f"{s['counts']['skipped']} unchanged; mean {s['score']['mean']:g}/{s['score']['max_score']:g}; "
        f"report: {outcome.out / 'report.html'}",
        file=sys.stderr,
    )
    return report_errors(outcome.error_kinds())


def warn_exports(formats: tuple[str, ...] | list[str], roster: list[Any] | None) -> None:
    """Say before any work what an export will lack (a Canvas export without a roster)."""
    from grader.exports import lms

    why = lms.warning(formats, roster)
    if why:
        print(f"grader: warning: {why}", file=sys.stderr, flush=True)


def report_errors(errors: dict[str, int]) -> int:
    """One line per error kind saying what to do next; the exit code (also for shards and merge)."""
    for kind, count in sorted(errors.items()):
        print(
            f"grader: {count} submission(s) ended in a{'n' if kind[0] in 'aeiou' else ''} {kind} error; "
            f"{_NEXT_STEP.get(kind, 'see summary.json')}",
            file=sys.stderr,
        )
    return ExitCode.FAILED if errors else ExitCode.OK


def roster_of(path: str | None) -> list[Any] | None:
    """The ``--roster`` file's students (a usage error when it cannot be read)."""
    from grader.intake import roster

    if path is None:
        return None
    try:
        return roster.load(path)
    except roster.RosterError as exc:
        raise UsageError(str(exc)) from None


_NEXT_STEP = {
    "grader": "see summary.json; rerun the same command to retry them (no --force needed)",
    "intake": "the submissions could not be read as given: see each scorecard's error message",
    "isolation": "the sandbox level was refused: see --require-isolation",
}
