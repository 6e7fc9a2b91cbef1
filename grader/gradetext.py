"""What ``grader grade`` says to a person: the total, one line per exercise, the reason for an
error.

Plain text (it goes to a terminal, a pipe or a CI log alike); every student-influenced part passes
through :mod:`grader.safetext` (a test message cannot forge a line). The scorecard itself is JSON on
request (``--json``) or in a file (``--out``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from grader import safetext
from grader.cardtypes import ExerciseEntry, Scorecard

_TAGGED = re.compile(
    r"\n  diagnosis \[([a-z0-9-]+(?:, [a-z0-9-]+)*)\]: "
)  # grader.testing.diagnosis.TAG's form


def diagnosed(test: Mapping[str, Any]) -> str | None:
    """The misconception a failing test names: the ``diagnosis [id]: `` tag in its message (how the
    suites name one: the scorecard's test entry has no field for it); None where it names none. The
    one place that reads it."""
    tagged = _TAGGED.search(str(test.get("message") or ""))
    return tagged.group(1) if tagged else None


def split_message(message: str) -> tuple[str, str | None]:
    """(the failure without its diagnosis or hint, that diagnosis or hint or None): a check ends its
    message with ``\\n  diagnosis [id]: ...`` (what the output shows,
    :mod:`grader.testing.diagnosis`) or ``\\n  hint: ...`` (:func:`grader.testing.checks.fail`).
    Light: ``grader check``, this summary and the batch report share it."""
    found = re.search(r"\n  (diagnosis \[[a-z0-9, -]+\]: |hint: )", message)
    if not found:
        return message.strip(), None
    head, said = message[: found.start()], message[found.end() :]
    said = said.split("\n(severe:")[0].strip()  # the cap's own note stays with the head's test
    return head.strip(), (said or None)


def summary(card: Scorecard) -> list[str]:
    """The human summary of one scorecard, first line ``graded: 87/100 ...`` or ``error (intake):
    why``."""
    if card["status"] == "error":
        error = card["error"]
        kind, message = (error["kind"], error["message"]) if error else ("grader", "")
        return [
            f"error ({safetext.name(kind)}): {safetext.name(message, 1000)}",
            _NEXT.get(error["kind"], "") if error else "",
        ]
    iso = card["isolation"]
    head = (
        f"graded: {card['score']:g}/{card['max_score']:g} ({safetext.name(card['submission']['path'], 200)}; "
        f"`{iso['backend']}` isolation{', attested' if iso.get('attested') else ''}; seed {card['seed']})"
    )
    width = max((len(e["id"]) for e in card["exercises"]), default=0)
    return [head, *(_exercise(e, width) for e in card["exercises"]), *_incidents(card)]


def _exercise(exercise: ExerciseEntry, width: int) -> str:
    points = f"{exercise['score']:g}/{exercise['max_score']:g}"
    line = f"  {exercise['id']:<{width}}  {points:>9}"
    bad = [t for t in exercise["tests"] if t["counted"] and t["outcome"] != "passed"]
    if exercise.get("withheld"):
        return f"{line}  withheld: {safetext.name(exercise['withheld'], 300)}"
    if not bad:
        return line
    first = bad[0]
    head = (first["message"].strip().splitlines() or [first["outcome"]])[0]
    capped = "  (capped at half: a severe failure)" if exercise.get("capped") else ""
    return (
        f"{line}  {len(bad)} of {len(exercise['tests'])} tests failing; first: {safetext.name(first['name'])}: "
        f"{safetext.name(head, 200)}{capped}"
    )


def _incidents(card: Scorecard) -> list[str]:
    kinds: dict[str, int] = {}
    for incident in card["incidents"]:
        kinds[incident["kind"]] = kinds.get(incident["kind"], 0) + 1
    return (
        [f"incidents: {', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}"] if kinds else []
    )


_NEXT = {
    "intake": "the submission could not be read as given: give a folder, .py, .ipynb, .zip or .tar.gz of the "
    "exercise modules",
    "grader": "the grader could not grade it (not the student's fault): run the same command again",
    "isolation": "the sandbox level was refused: see --isolation and --require-isolation",
}
