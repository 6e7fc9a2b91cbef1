"""The misconceptions the feedback can name: one id each, what it is in a student's words, and
whether a student makes it in the normal case (ordinary inputs, ordinary use) or only shows it on an
edge (a device, half precision, memory, an invalid argument).

A diagnosis names an id here (``diagnosis [id]: ...`` in a test's message,
:mod:`grader.testing.diagnosis`); each corpus bug declares the one it makes (``Misconception: id``
in its docstring). ``named_by`` recognises text that names the misconception without a diagnosis tag
(the canned hints the suites gave before diagnosis): the feedback benchmark
(``benchmarks/feedback.py``) reads it to tell a message that names a bug's own mistake from one that
hints at another. The rows live in three tables of plain data (``misconceptions_basics``,
``_weights``, ``_modern``); no torch and no other grader import here: the benchmark loads these
files by path to judge older commits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from grader.testing.misconceptions_basics import BASICS
from grader.testing.misconceptions_modern import MODERN
from grader.testing.misconceptions_weights import WEIGHTS


@dataclass(frozen=True)
class Misconception:
    id: str
    says: str  # the mistake, as the feedback names it
    normal: bool  # shows for ordinary inputs in ordinary use (the public suites must catch it)
    named_by: str  # a regular expression (case-insensitive) matching text that names it


BY_TABLES = BASICS + WEIGHTS + MODERN
CATALOGUE: tuple[Misconception, ...] = tuple(Misconception(*row) for row in BY_TABLES)

BY_ID: dict[str, Misconception] = {m.id: m for m in CATALOGUE}
TAG = re.compile(
    r"diagnosis \[([a-z0-9, -]+)\]"
)  # how a message names a misconception (or several, equal there)


DECLARED = re.compile(r"^Misconception: ([a-z0-9-]+)\s*$", re.MULTILINE)  # a corpus bug's docstring
SELF_EXPLAINED = {
    "InputModified:": "inplace-input",
    "BannedAPIError:": "banned-api",
}  # the sandbox's own words
HINT = re.compile(r"^\s*hint: (.*)$", re.MULTILINE)


def named_in(message: str) -> set[str]:
    """The ids a test's failure message names: its diagnosis tags if it has any, else every id whose
    ``named_by`` matches one of its hints (what a message says it observed names nothing by
    itself)."""
    tagged = {mid for found in TAG.findall(message) for mid in found.split(", ")}
    if tagged:
        return tagged
    said = next((mid for prefix, mid in SELF_EXPLAINED.items() if message.startswith(prefix)), None)
    if said:
        return {said}
    hints = "\n".join(HINT.findall(message))
    return {m.id for m in CATALOGUE if hints and re.search(m.named_by, hints, re.IGNORECASE)}


def verdict(mid: str, message: str) -> str:
    """What a failure message says of a bug that makes ``mid``: "names" it, "misleading" (names
    only others) or "neutral" (names none)."""
    named = named_in(message)
    return "names" if mid in named else "misleading" if named else "neutral"
