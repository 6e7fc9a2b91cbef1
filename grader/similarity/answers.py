"""Groups of students who gave the same wrong answers: equal digests of failing outputs on the same
tests.

Each failed test's ``wrong_answer`` (a digest of the values the student's code gave back, taken by
the trusted runner: :mod:`grader.scoring.answers`) is comparable only with the same test graded on
the same seed. A wrong answer more than ``few`` students share is a common mistake (students make it
independently), never evidence, nor is a failure whose message names its misconception (a
``diagnosis [id]`` tag from the feedback catalogue: :func:`grader.gradetext.diagnosed`); what is
left groups the students who share it, and a group is listed when they share at least ``min_tests``
of them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from grader.cardtypes import AnyCard
from grader.gradetext import diagnosed

FEW = 3  # a wrong answer more students than this give is a common mistake
MIN_TESTS = 2  # distinct failed tests a group must share


def _wrong(named: Iterable[tuple[str, AnyCard]]) -> dict[tuple[int, str, str], set[str]]:
    """(seed, test id, digest) -> the students whose card failed that test with that digest (a
    diagnosed misconception: under the key ``(seed, test, "")``, which counts as common)."""
    seen: dict[tuple[int, str, str], set[str]] = defaultdict(set)
    for key, card in named:
        if card.get("status") != "graded":
            continue
        for ex in card.get("exercises", []):
            for test in ex.get("tests", []):
                digest = test.get("wrong_answer")
                if digest and test.get("outcome") == "failed":
                    named_mistake = "" if diagnosed(test) else str(digest)
                    seen[(int(card.get("seed", 0)), str(test["id"]), named_mistake)].add(key)
    return seen


def groups(
    named: Iterable[tuple[str, AnyCard]], *, few: int = FEW, min_tests: int = MIN_TESTS
) -> tuple[list[dict[str, Any]], int]:
    """The same-wrong-answer groups, most shared tests first; and how many wrong answers were left
    out as common."""
    by_students: dict[frozenset[str], list[tuple[int, str, str]]] = defaultdict(list)
    common = 0
    for answer, who in _wrong(named).items():
        if len(who) > few or not answer[2]:
            common += 1
        elif len(who) > 1:
            by_students[frozenset(who)].append(answer)
    out: list[dict[str, Any]] = []
    for students, answers in by_students.items():
        tests = sorted({test for _, test, _ in answers})
        if len(tests) >= min_tests:
            out.append(
                {
                    "students": sorted(students),
                    "seed": answers[0][0],
                    "tests": tests,
                    "digests": sorted({digest for _, _, digest in answers}),
                }
            )
    out.sort(key=lambda g: (-len(g["tests"]), g["students"]))
    return out, common
