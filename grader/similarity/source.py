"""A class's code, per exercise, as :mod:`grader.similarity.match` compares it: each submission read
by intake.

Nothing a student wrote runs here: intake copies the submission's files (bounded, links refused) and
this module reads them as text. A file holding every exercise (one ``.py`` or a notebook) is cut per
exercise (:func:`grader.similarity.code.exercise_lines`); a module that is still the released stub
adds nothing of its own (its tokens are the given code), so it pairs with no one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from grader.course import manifest
from grader.errors import GraderFault
from grader.intake import submission as intake
from grader.similarity import code, match

# per module read: a bigger file is compared on its first 512 KiB (and MAX_TOKENS)
MAX_BYTES = 512 * 1024


@dataclass
class Exercise:
    """One exercise's stub (the given code) and every submission's code for it."""

    id: str
    module: str
    given: list[code.Token]
    keep: frozenset[str]  # names kept wherever they appear (code.prescribed_names)
    attrs: frozenset[str]  # attribute names kept (code.given_names)
    names: set[str]
    docs: list[match.Doc] = field(default_factory=list)


def exercises(assignment: manifest.Assignment, ids: Iterable[str] | None = None) -> list[Exercise]:
    """The exercises to compare (``ids``: only those), each with its released stub's tokens."""
    wanted = set(ids) if ids is not None else None
    out = []
    for ex in assignment.exercises:
        if wanted is not None and ex.id not in wanted:
            continue
        stub_path = assignment.root / "exercises" / f"{ex.module}.py"
        stub = stub_path.read_text("utf-8") if stub_path.is_file() else ""
        keep, attrs = code.prescribed_names(stub), code.given_names(stub)
        out.append(
            Exercise(
                ex.id,
                ex.module,
                code.tokens(stub, keep=keep, attrs=attrs),
                keep,
                attrs,
                code.stub_names(stub),
            )
        )
    return out


def read_class(entries: Iterable[tuple[str, Path]], found: list[Exercise]) -> list[str]:
    """Add each submission's code to ``found``; the keys of submissions intake could not read."""
    modules = {ex.module for ex in found}
    unread = []
    for key, path in entries:
        try:
            sub = intake.take(path, modules=modules)
        except (intake.IntakeError, GraderFault, OSError):
            unread.append(key)
            continue
        try:
            _add(key, sub, found)
        finally:
            sub.cleanup()
    return unread


def _add(key: str, sub: intake.Submission, found: list[Exercise]) -> None:
    for ex in found:
        path = sub.box / (f"{sub.single_module}.py" if sub.single_module else f"{ex.module}.py")
        text = _read(path)
        if text is None:
            continue
        lines = code.exercise_lines(text, ex.names) if sub.single_module else None
        if lines is not None and not lines:
            continue  # the single file defines nothing of this exercise
        ex.docs.append(match.doc(key, text, lines, ex.keep, ex.attrs))


def _read(path: Path) -> str | None:
    """The module's text as Python would decode it (``None``: absent, or not decodable)."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_BYTES)
    except OSError:
        return None
    if len(data) == MAX_BYTES:  # cut: end on a whole line, never inside a multi-byte character
        data = data[: data.rfind(b"\n") + 1]
    return code.decode(data)
