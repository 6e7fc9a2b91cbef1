"""Gradebook files an LMS imports: Canvas's gradebook CSV and Moodle's grade-import CSV.

Canvas (``app/models/gradebook_importer.rb`` in canvas-lms, and its "How do I import grades in the
Gradebook?" guide): the header starts ``Student, ID, SIS User ID, SIS Login ID, Section`` (the
importer checks ``Student`` then ``ID``, and that the last student column is ``Section``), then one
column per assignment, named by its title (a new assignment) or ``Title (assignment id)``; an
optional second row whose first cell says ``Points Possible`` gives each assignment's points; a
student is found by ``ID`` (the Canvas user id), else SIS user id, else SIS login id, else name.

Moodle (``grade/import/csv``): any header; the teacher maps one column to the user by ``id``,
``username``, ``idnumber`` or ``email``, and each other column to a grade item or its feedback. A
blank grade is skipped, so a submission that ended in a grader error gets a blank cell (it is not a
0 to upload) and a roster student with no submission gets 0, with the reason as feedback.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from dataclasses import dataclass

from grader.cardtypes import AnyCard
from grader.intake.roster import Student

FORMATS = ("canvas", "moodle")
CANVAS_STUDENT_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
MOODLE_COLUMNS = ["Username", "Full name", "Email address", "ID number"]
Cell = Callable[[object], object]  # escapes one CSV cell (outputs.csv_cell)


@dataclass(frozen=True)
class Line:
    """One gradebook line: a scorecard (``None``: on the roster, no submission) and its roster
    entry."""

    key: str
    card: AnyCard | None
    student: Student | None

    @property
    def status(self) -> str:
        return self.card["status"] if self.card else "missing"

    def grade(self) -> float | str:
        """Points to upload: the score, 0 when missing, blank when grading failed (nothing to
        upload)."""
        if self.card is None:
            return 0
        return self.card["score"] if self.card["status"] == "graded" else ""

    def feedback(self) -> str:
        if self.card is None:
            return "missing: no submission was found"
        if self.card["status"] != "graded":
            return f"not graded ({(self.card.get('error') or {}).get('kind', 'error')} error): see the report"
        return f"{self.card['score']:g}/{self.card['max_score']:g}"


def join(named: list[tuple[str, AnyCard]], students: list[Student] | None) -> list[Line]:
    """Roster students in roster order (their card or none), then submissions from logins not on
    it."""
    cards = dict(named)
    lines = [Line(s.key, cards.get(s.key), s) for s in students or []]
    listed = {line.key for line in lines}
    return lines + [Line(key, card, None) for key, card in sorted(named) if key not in listed]


def warning(formats: tuple[str, ...] | list[str], roster: list[Student] | None) -> str | None:
    """What an export without a roster leaves out, and what to pass; None when nothing is left
    out."""
    if "canvas" not in formats or roster is not None:
        return None
    return (
        "the Canvas export has no roster: its ID and SIS User ID columns are blank, so Canvas can match each "
        "row only by SIS Login ID (the submission's login) or by name, and rows it cannot match are skipped. "
        "Pass --roster roster.csv (columns login, name, and lms_id for Canvas's user ID, sis_user_id, "
        "sis_login_id, section) to fill them"
    )


def canvas(lines: list[Line], title: str, points: float, cell: Cell) -> str:
    """Canvas's import CSV: one assignment column named ``title``; ``cell`` escapes formulas."""
    rows: list[list[object]] = [
        [*CANVAS_STUDENT_COLUMNS, title],
        ["    Points Possible", "", "", "", "", f"{points:g}"],
    ]
    for line in lines:
        s = line.student or Student(login=line.key)
        sis_login = s.sis_login_id or ("" if line.student and s.lms_id else s.login)
        rows.append(
            [s.name or s.login, s.lms_id, s.sis_user_id, sis_login, s.section, line.grade()]
        )
    return _csv(rows, cell)


def moodle(lines: list[Line], title: str, cell: Cell) -> str:
    """Moodle's grade-import CSV: identity columns, the grade, its feedback."""
    rows: list[list[object]] = [[*MOODLE_COLUMNS, title, f"{title} (feedback)"]]
    for line in lines:
        s = line.student or Student(login=line.key)
        rows.append([s.login, s.name, s.email, s.lms_id, line.grade(), line.feedback()])
    return _csv(rows, cell)


def _csv(rows: list[list[object]], cell: Cell) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    for r in rows:
        writer.writerow([cell(v) for v in r])
    return buffer.getvalue()
