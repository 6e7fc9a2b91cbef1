"""The figures of the last run that graded something: a rerun that only kept unchanged scorecards
measured nothing, so its summary keeps the previous one's (from ``last_graded_run``, or an older
summary's top level)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grader.scoring import scorecard


def rate(count: int, wall_s: float) -> float:
    """Submissions per minute."""
    return round(60.0 * count / wall_s, 2) if wall_s > 0 and count > 0 else 0


def figures(
    count: int, wall_s: float, slots: int, previous: dict[str, Any] | None
) -> dict[str, Any]:
    """This run's figures when it graded something, else the last real ones (an older summary's top
    level too)."""
    fresh = {
        "generated": scorecard.now(),
        "graded": max(count, 0),
        "wall_s": round(wall_s, 3),
        "submissions_per_minute": rate(count, wall_s),
        "slots": slots,
    }
    if count > 0 or not previous:
        return fresh
    kept = previous.get("last_graded_run")
    if not isinstance(kept, dict):  # a summary written before the field: its own top-level figures
        raw_counts = previous.get("counts")
        counts: dict[str, Any] = raw_counts if isinstance(raw_counts, dict) else {}
        kept = {
            "generated": previous.get("generated"),
            "wall_s": previous.get("wall_s"),
            "submissions_per_minute": previous.get("submissions_per_minute"),
            "slots": previous.get("slots"),
            "graded": _int(counts.get("submissions")) - _int(counts.get("skipped")),
        }
    return kept if _is_run(kept) else fresh


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _is_run(run: dict[str, Any]) -> bool:
    """``run`` has the shape of ``last_graded_run`` and measured something (the old file may hold
    anything)."""
    numbers = [run.get(k) for k in ("wall_s", "submissions_per_minute")]
    return (
        set(run) == {"generated", "graded", "wall_s", "submissions_per_minute", "slots"}
        and isinstance(run["generated"], str)
        and _int(run["graded"]) > 0
        and _int(run["slots"]) >= 1
        and all(isinstance(n, (int, float)) and not isinstance(n, bool) and n >= 0 for n in numbers)
        and run["submissions_per_minute"] > 0
    )


def read_summary(path: Path) -> dict[str, Any] | None:
    """The summary a previous run left at ``path`` (any version: only what is checked is used)."""
    try:
        doc = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None
