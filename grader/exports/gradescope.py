"""A scorecard as Gradescope's ``results.json``: the one builder, for ``run_autograder`` and for
batch exports.

Per test: name, number, score, max_score, status, the message as Markdown (in a code fence: a
student-controlled message can never become a link, an image or HTML), tags, ``visibility``
(hidden suites: ``after_published`` unless configured otherwise), ``extra_data``. Top level: the
score (after any late penalty: Gradescope lets it override the tests' sum), ``execution_time``,
``output_format: md``, ``stdout_visibility: hidden`` (the grader's log is for instructors), and
``extra_data`` with the seed, grader version, isolation record and canary. A grader that failed
writes no results.json at all (:mod:`grader.release.gradescope_run`); a batch's export of a card
that ended in a grader error says so in general terms (the instructor has the details), never as the
student's fault. Every document is checked against the ``gradescope-results`` schema before it is
handed out.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from grader import schema
from grader.cardtypes import AnyCard, error_of

GENERIC_FAILURE = "The autograder could not grade this submission; your instructor has the details."


def fence(text: str) -> str:
    """``text`` as a Markdown code block whose fence is longer than any backtick run inside it."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}text\n{text}\n{ticks}"


def document(card: AnyCard, *, visibility: str = "visible") -> dict[str, Any]:
    """``results.json`` for any scorecard a batch exports: graded, or the grader's error (never a
    reason to lose points: no tests, the error kept for the instructor in ``extra_data``)."""
    if card["status"] == "error":
        out = {
            "score": 0,
            "execution_time": round(float(card["timings"].get("total_s", 0)), 3),
            "output": GENERIC_FAILURE,
            "output_format": "md",
            "stdout_visibility": "hidden",
            "tests": [],
            "extra_data": {"error": card["error"], "grader": card["grader"]},
        }
        schema.validate("gradescope-results", out)
        return out
    return results(card, visibility=visibility)


def results(
    card: AnyCard,
    *,
    visibility: str,
    late: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``results.json`` for a graded scorecard (``status: graded``)."""
    score = late["score"] if late else card["score"]
    out = {
        "score": score,
        "execution_time": round(float(card["timings"].get("total_s", 0)), 3),
        "output": _summary(card, late),
        "output_format": "md",
        "test_output_format": "md",
        "stdout_visibility": "hidden",
        "tests": _tests(card, visibility),
        "extra_data": {
            "seed": card["seed"],
            "grader": card["grader"],
            "isolation": card["isolation"],
            "score_before_late_policy": card["score"],
            "late": late,
            "integrity": card.get("integrity"),
            **(extra or {}),
        },
    }
    schema.validate("gradescope-results", out)
    return out


def _tests(card: AnyCard, visibility: str) -> list[dict[str, Any]]:
    return [
        {
            "name": f"{e['title']}: {t['name']}",
            "number": f"{i}.{j}",
            "score": t["points"],
            "max_score": t["max_points"],
            "status": "passed" if t["outcome"] == "passed" else "failed",
            "output": fence(t["message"]) if t["message"] else "",
            "output_format": "md",
            "tags": [e["id"]],
            "visibility": visibility,
            "extra_data": {"outcome": t["outcome"], "duration_s": t["duration"]},
        }
        for i, e in enumerate(card["exercises"], 1)
        for j, t in enumerate(e["tests"], 1)
        if t["counted"]
    ]


def _summary(card: AnyCard, late: dict[str, Any] | None) -> str:
    lines = [
        f"Score **{card['score']:g}/{card['max_score']:g}** from the hidden tests, run in a sandbox with "
        f"fresh random inputs (seed {card['seed']})."
    ]
    if late:
        lines.append(
            f"Late by {late['days_late']} day(s): {late['fraction']:.0%} of the score deducted "
            f"({late['deduction']:g} points), **{late['score']:g}** counted."
        )
    return "\n\n".join(lines)


def intake_rejected(card: AnyCard, *, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The submission itself could not be read (no Python files, a bad archive): 0, with the
    reason."""
    message = error_of(card)["message"]
    out = {
        "score": 0,
        "execution_time": round(float(card["timings"].get("total_s", 0)), 3),
        "output": "Your submission could not be graded as uploaded:\n\n" + fence(message),
        "output_format": "md",
        "stdout_visibility": "hidden",
        "tests": [
            {
                "name": "Submission readable",
                "status": "failed",
                "score": 0,
                "max_score": card["max_score"],
                "output": fence(message),
                "output_format": "md",
                "visibility": "visible",
            }
        ],
        "extra_data": {"intake_error": message, "grader": card["grader"], **(extra or {})},
    }
    schema.validate("gradescope-results", out)
    return out


def write_atomic(path: Path, document: dict[str, Any]) -> None:
    """Write ``document`` next to ``path`` and rename it into place: Gradescope never reads half a
    file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".results-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(document, fh, indent=2, allow_nan=False)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
