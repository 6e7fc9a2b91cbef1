"""``--roster roster.csv``: who is in the class, as the LMS knows them.

A CSV file with a header row; columns (any order, case-insensitive, Excel's BOM accepted):
``login`` (the submission's id: a GitHub login, an nbgrader student id; required), ``name``,
``email``, ``lms_id`` (Canvas's user ID, Moodle's ID number), and optionally ``sis_user_id``,
``sis_login_id`` and ``section`` for Canvas. The roster is the instructor's file, yet its cells end
up in CSV exports and the report, so each is made safe text like any other string.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

from grader import safetext
from grader.intake.classfolder import safe_id

MAX_BYTES = 4 << 20
FIELDS = ("login", "name", "email", "lms_id", "sis_user_id", "sis_login_id", "section")
_ALIASES = {
    "github": "login",
    "username": "login",
    "student": "login",
    "full name": "name",
    "e-mail": "email",
    "email address": "email",
    "id number": "lms_id",
    "idnumber": "lms_id",
    "lms id": "lms_id",
    "canvas id": "lms_id",
}


class RosterError(ValueError):
    """The roster cannot be read (the message says what to fix)."""


@dataclass(frozen=True)
class Student:
    login: str
    name: str = ""
    email: str = ""
    lms_id: str = ""
    sis_user_id: str = ""
    sis_login_id: str = ""
    section: str = ""

    @property
    def key(self) -> str:
        """The scorecard key a submission by this login gets (see
        :func:`grader.intake.classfolder.safe_id`)."""
        return safe_id(self.login)


def load(path: Path | str) -> list[Student]:
    """The roster's students, in file order; :class:`RosterError` for an unreadable file."""
    path = Path(path)
    try:
        data = path.read_bytes()[: MAX_BYTES + 1]
        text = data.decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise RosterError(
            f"{path}: cannot read the roster ({type(exc).__name__}); give a UTF-8 CSV file"
        ) from None
    if len(data) > MAX_BYTES:
        raise RosterError(f"{path}: larger than {MAX_BYTES >> 20} MiB")
    return parse(text, str(path))


def parse(text: str, where: str = "roster") -> list[Student]:
    reader = csv.reader(io.StringIO(text))
    header = [_column(h) for h in next(reader, [])]
    if "login" not in header:
        raise RosterError(
            f"{where}: no `login` column in the header (columns: {', '.join(FIELDS)})"
        )
    students: dict[str, Student] = {}
    for number, cells in enumerate(reader, 2):
        values = {h: safetext.name(c.strip(), 200) for h, c in zip(header, cells) if h in FIELDS}
        if not values.get("login"):
            continue  # a blank line, or a row without a login: nothing to match
        student = Student(**values)
        if student.key in students:
            raise RosterError(f"{where}, line {number}: login {student.login!r} is listed twice")
        students[student.key] = student
    return list(students.values())


def _column(header: str) -> str:
    name = header.strip().lower()
    return _ALIASES.get(name, name.replace(" ", "_"))
