"""What a batch leaves in its folder besides the scorecards: gradebook.csv and the LMS exports
(``summary.json``: :mod:`grader.exports.summary`).

With a roster (:mod:`grader.intake.roster`) the gradebook gains the name, email and LMS id of each
student, and a roster student with no submission gets a row with 0 and status ``missing``; Canvas
and Moodle files come from :mod:`grader.exports.lms`.

Every output must survive any scorecard, old ones on disk included: each card is passed through
:func:`clean_tree` (:mod:`grader.safetext` on every string: no lone surrogate can break an encoder,
no control character reaches a page or a terminal) and files are written with encoding errors
escaped. CSV cells that a spreadsheet would run as a formula are escaped (OWASP CSV injection).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import tempfile
from collections import defaultdict
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path
from typing import Any

from grader import safetext
from grader.cardtypes import AnyCard
from grader.course import manifest
from grader.errors import GraderFault
from grader.exports import gradescope, lms
from grader.exports import rows as exports
from grader.intake import submission as intake
from grader.intake.classfolder import safe_id
from grader.intake.roster import Student
from grader.scoring import scorecard

FORMATS = ("gradescope", "github-classroom", "csv", *lms.FORMATS)
ROSTER_COLUMNS = ("name", "email", "lms_id")
_FORMULA = ("=", "+", "-", "@", "\t", "\r", "\n")  # OWASP: a cell starting so may run as a formula
_FILE_KEY = re.compile(r"[A-Za-z0-9_@+-][A-Za-z0-9._@+-]*")
Named = Collection[tuple[str, AnyCard]]  # a list, or cards read from disk one at a time


def clean_tree(value: Any) -> Any:
    """``value`` with every string (keys too) passed through ``safetext.text``, uncapped."""
    if isinstance(value, str):
        return safetext.text(value, 1 << 30)
    if isinstance(value, dict):
        return {clean_tree(k): clean_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_tree(v) for v in value]
    return value


def _cleaned(
    named: Iterable[tuple[str, AnyCard]], *, whole: bool = True
) -> Iterator[tuple[str, AnyCard]]:
    """Each (key, card) made safe text, one at a time; ``whole=False``: its slim form, for a list of
    the class (:func:`grader.scoring.scorecard.slim`)."""
    for key, card in named:
        yield safetext.name(key), clean_tree(card if whole else scorecard.slim(card))


def csv_cell(value: object) -> object:
    """A text cell starting with ``= + - @``, tab or CR gets a leading ``'``; numbers stay
    numbers."""
    if isinstance(value, str) and value.startswith(_FORMULA):
        return "'" + value
    return value


def write_text(path: Path, text: str) -> None:
    """Atomic write (temp file in the same folder, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace", newline="") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def gradebook_csv(
    named: Named, exercise_ids: list[str], roster: list[Student] | None = None
) -> str:
    """One row per student (``exports.csv_row``), keyed by the scorecard's name, every cell escaped.

    With ``roster``: its columns after ``student``, roster order first, a ``missing`` row (0) for
    each roster student without a submission, then the submissions whose login is not on the roster.
    """
    buffer = io.StringIO()
    fields = list(exports.csv_row(_blank(exercise_ids), exercise_ids))
    if roster is not None:
        fields[1:1] = ROSTER_COLUMNS
    writer = csv.DictWriter(buffer, fieldnames=[csv_cell(f) for f in fields], lineterminator="\n")
    writer.writeheader()
    cleaned = list(_cleaned(named, whole=False))
    lines = (
        lms.join(cleaned, roster)
        if roster is not None
        else [lms.Line(k, c, None) for k, c in cleaned]
    )
    for line in lines:
        row = exports.csv_row(line.card, exercise_ids) if line.card else _missing(exercise_ids)
        row["student"] = line.key
        if roster is not None:
            row.update({c: getattr(line.student, c, "") for c in ROSTER_COLUMNS})
        writer.writerow({csv_cell(k): csv_cell(row.get(k, "")) for k in fields})
    return buffer.getvalue()


def _missing(exercise_ids: list[str]) -> dict[str, Any]:
    return {
        **{ex: 0 for ex in exercise_ids},
        "total": 0,
        "max_score": "",
        "status": "missing",
        "error": "",
        "isolation": "",
        "sha256": "",
        "seed": "",
    }


def _blank(exercise_ids: list[str]) -> dict[str, Any]:
    return {
        "exercises": [],
        "submission": {"path": "", "sha256": ""},
        "score": 0,
        "max_score": 0,
        "status": "graded",
        "error": None,
        "isolation": {"backend": "none"},
        "seed": 0,
    }


def export(
    named: Named,
    fmt: str,
    out: Path,
    exercise_ids: list[str],
    *,
    roster: list[Student] | None = None,
    title: str = "",
    points: float | None = None,
) -> list[Path]:
    """Write ``fmt`` exports of the cards into ``out``; return the files written (each validated).

    ``title`` and ``points`` name the LMS gradebook column (Canvas, Moodle) and its points possible.
    """
    if fmt == "csv":
        path = out / "gradebook.csv"
        write_text(path, gradebook_csv(named, exercise_ids, roster))
        return [path]
    if fmt in lms.FORMATS:
        lines = lms.join(list(_cleaned(named, whole=False)), roster)
        title = safetext.name(title or next((c["assignment"] for _, c in named), "grade"))
        points = (
            points if points is not None else max((c["max_score"] for _, c in named), default=0)
        )
        text = (
            lms.canvas(lines, title, points, csv_cell)
            if fmt == "canvas"
            else lms.moodle(lines, title, csv_cell)
        )
        path = out / f"{fmt}.csv"
        write_text(path, text)
        return [path]
    written = []
    for key, card in _cleaned(named):
        key = _file_key(key)
        if fmt == "gradescope":
            path, doc = out / key / "results.json", gradescope.document(card)
        else:
            path, doc = out / f"{key}.json", exports.to_github_classroom(card)
        write_text(path, json.dumps(doc, indent=2) + "\n")
        written.append(path)
    return written


def _file_key(key: str) -> str:
    """A scorecard name fit to name a file in ``out`` (``..`` or a separator made plain)."""
    return key if _FILE_KEY.fullmatch(key) else safe_id(key)


def identical(named: Named, *, ignore: str = "") -> list[dict[str, Any]]:
    """Groups of students whose submissions hash the same (``ignore``: the released stubs' hash)."""
    groups: dict[str, list[str]] = defaultdict(list)
    for key, card in named:
        sha = card["submission"]["sha256"]
        if sha and sha != ignore:
            groups[sha].append(key)
    return [
        {"sha256": sha, "students": sorted(set(keys))}
        for sha, keys in sorted(groups.items())
        if len(set(keys)) > 1
    ]


def stubs_sha256(assignment: manifest.Assignment) -> str:
    """The hash intake gives the untouched released stubs (``""`` when they are not here)."""
    try:
        sub = intake.take(
            assignment.root / "exercises", modules={e.module for e in assignment.exercises}
        )
    except (intake.IntakeError, GraderFault):
        return ""
    sub.cleanup()
    return sub.sha256
