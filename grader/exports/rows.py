"""Exporters: plain mappings from a scorecard to GitHub Classroom and CSV rows (Gradescope:
:mod:`grader.exports.gradescope`).

Each export is validated against the schema we keep for it (grader/schemas). GitHub Classroom's
reporter sums ``tests[].score``, so each test carries its real points; a scorecard with
``status: error`` still yields a ``tests`` array (the reporter throws without one).
"""

from __future__ import annotations

from typing import Any

from grader import schema
from grader.cardtypes import AnyCard

GENERIC_FAILURE = "The autograder could not grade this submission; your instructor has the details."


def to_github_classroom(card: AnyCard) -> dict[str, Any]:
    tests = [
        {
            "name": f"{e['id']}: {t['name']}",
            "status": _gh_status(t["outcome"]),
            "score": t["points"],
            "message": t["message"][:2000],
            "test_code": t["id"],
            "filename": t["id"].split("::")[0],
            "line_no": 0,
            "duration": round(t["duration"] * 1000, 3),
        }
        for e in card["exercises"]
        for t in e["tests"]
        if t["counted"]
    ]
    if card["status"] == "error":
        status = "error"
        tests.append(
            {
                "name": "grading",
                "status": "error",
                "score": 0,
                "message": GENERIC_FAILURE,
                "test_code": "",
                "filename": "",
                "line_no": 0,
                "duration": 0,
            }
        )
    else:
        status = "pass" if card["score"] == card["max_score"] else "fail"
    out = {"version": 1, "status": status, "max_score": card["max_score"] or 100, "tests": tests}
    schema.validate("github-classroom", out)
    return out


def _gh_status(outcome: str) -> str:
    return {"passed": "pass", "failed": "fail"}.get(outcome, "error")


def csv_row(card: AnyCard, exercise_ids: list[str]) -> dict[str, Any]:
    """One gradebook row: per-exercise points, total, status, isolation backend.

    A submission that was not graded (``status: error``) has blank points, as an LMS's own export
    leaves them, with the status and error kind beside: a 0 would be uploaded as a grade."""
    graded = card["status"] == "graded"
    points = {e["id"]: e["score"] for e in card["exercises"]}
    sub = card["submission"]
    row: dict[str, Any] = {"student": sub.get("student") or sub["path"]}
    row.update({ex: points.get(ex, 0) if graded else "" for ex in exercise_ids})
    row.update(
        total=card["score"] if graded else "",
        max_score=card["max_score"],
        status=card["status"],
        error=(card["error"] or {}).get("kind", ""),
        isolation=card["isolation"]["backend"],
        sha256=sub["sha256"],
        seed=card["seed"],
    )
    return row
