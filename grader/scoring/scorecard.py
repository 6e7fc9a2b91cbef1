"""Where the scorecard is built and written: validated against its schema, written atomically.

An invalid scorecard is a grader bug: :func:`write` refuses to write one.
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from grader import __version__, safetext, schema
from grader.scoring.collect import TestResult
from grader.scoring.points import ExerciseScore, counts_toward_max

def clean(text: str, limit: int = 4000) -> str:
    """Student-influenced text made safe to show (see :mod:`grader.safetext`), length capped."""
    return safetext.text(text, limit)


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def environment() -> dict[str, Any]:
    import torch

    cuda = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {"python": platform.python_version(), "torch": str(torch.__version__), "cuda": cuda,
            "platform": platform.platform(terse=True)}


def test_entry(result: TestResult, *, require_cuda: bool) -> dict[str, Any]:
    return {"id": result.id, "name": result.name, "outcome": result.outcome, "points": result.points,
            "max_points": result.max_points, "message": clean(result.message), "duration": round(result.duration, 4),
            "cuda": result.cuda, "counted": counts_toward_max(result, require_cuda=require_cuda)}


def exercise_entries(scores: list[ExerciseScore], *, require_cuda: bool) -> list[dict[str, Any]]:
    return [{"id": s.id, "title": s.title, "score": s.score, "max_score": s.max_score,
             "tests": [test_entry(t, require_cuda=require_cuda) for t in s.tests]} for s in scores]


def write(card: dict[str, Any], out: Path) -> None:
    """Validate, then write atomically (temp file in the same folder + ``os.replace``)."""
    schema.validate("scorecard", card)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(card, fh, indent=2)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def dumps(card: dict[str, Any]) -> str:
    schema.validate("scorecard", card)
    return json.dumps(card, indent=2)


def version() -> dict[str, str]:
    return {"version": __version__}
