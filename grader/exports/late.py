"""An optional late policy, applied where the platform tells us when the student submitted
(Gradescope).

The manifest's assignment may carry ``late_policy``: ``per_day`` (the fraction of the earned score
lost per started day after the due date), ``max_fraction`` (the most that can be lost, default 1)
and ``grace_minutes``. Gradescope's ``submission_metadata.json`` gives ``created_at`` and
``assignment.due_date`` / ``assignment.late_due_date``; without a policy or a due date nothing
changes.
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path
from typing import Any


def policy(manifest_path: Path, assignment: str) -> dict[str, Any] | None:
    """The assignment's ``late_policy`` (the schema has already checked it), or None."""
    document = json.loads(manifest_path.read_text("utf-8"))
    for raw in document["assignments"]:
        if raw["id"] == assignment:
            late: dict[str, Any] | None = raw.get("late_policy")
            return late
    return None


def metadata(path: Path) -> dict[str, Any]:
    """Gradescope's submission metadata; empty when absent or unreadable (grading goes on without
    it)."""
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _when(text: object) -> datetime | None:
    try:
        return datetime.fromisoformat(str(text)) if text else None
    except ValueError:
        return None


def assess(
    score: float, rules: dict[str, Any] | None, meta: dict[str, Any]
) -> dict[str, Any] | None:
    """What the policy does to ``score``: None when it does not apply (no policy, no dates, on
    time)."""
    created = _when(meta.get("created_at"))
    due = _when((meta.get("assignment") or {}).get("due_date"))
    if not rules or created is None or due is None or created.tzinfo is None or due.tzinfo is None:
        return None
    late_s = (created - due).total_seconds() - 60 * float(rules.get("grace_minutes", 0))
    if late_s <= 0:
        return None
    days = math.ceil(late_s / 86400)
    fraction = min(float(rules["per_day"]) * days, float(rules.get("max_fraction", 1.0)))
    deduction = round(score * fraction, 6)
    return {
        "days_late": days,
        "fraction": round(fraction, 6),
        "deduction": deduction,
        "score_before": score,
        "score": round(max(0.0, score - deduction), 6),
        "created_at": str(meta.get("created_at")),
        "due_date": str(meta["assignment"]["due_date"]),
        "late_due_date": (meta.get("assignment") or {}).get("late_due_date"),
    }
