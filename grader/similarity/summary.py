"""The ``similarity`` part of ``summary.json``: pairs of similar code per exercise and
same-wrong-answer groups.

Library entry points, keyword-only, used by ``grader batch --similarity`` and ``grader similarity``.
What a student wrote reaches the document only as bounded text (each fragment at most
``FRAGMENT_LINES`` lines of at most ``LINE_CHARS`` characters, lone surrogates and control
characters made safe by the summary's own cleaning), and the report escapes it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from grader.cardtypes import AnyCard
from grader.course import manifest
from grader.similarity import answers, idiom, match, source

NOTE = (
    "Similarity is evidence for a person to review, never an automatic penalty: shared code may come from the "
    "course material, a study group the rules allow, or chance; nothing here changes a score."
)
FRAGMENT_LINES = 40
LINE_CHARS = 200
MAX_PAIRS = 500  # listed pairs (highest share first); the count says how many were found
DEFAULT = match.Settings()


def code_pairs(
    *,
    entries: Iterable[tuple[str, Path]],
    assignment: manifest.Assignment,
    exercise_ids: Iterable[str] | None = None,
    settings: match.Settings = DEFAULT,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Pairs of submissions above ``settings.threshold``, per exercise; and the keys intake could
    not read."""
    found = source.exercises(assignment, exercise_ids)
    unread = source.read_class(entries, found)
    pairs = []
    for ex in found:
        common = (
            idiom.of_course(
                assignment.root, ex.module, tuple(ex.given), ex.keep, ex.attrs, settings.k
            )
            if settings.small(len(ex.docs))
            else frozenset()
        )
        for pair in match.compare(ex.docs, ex.given, settings, common):
            pairs.append(_pair(ex.id, pair))
    pairs.sort(key=lambda p: (-p["share"], p["exercise"], p["a"], p["b"]))
    return pairs, unread


def _pair(exercise: str, pair: match.Pair) -> dict[str, Any]:
    a, b = sorted((pair.a, pair.b), key=lambda d: d.key)
    flip = a is not pair.a
    return {
        "exercise": exercise,
        "a": a.key,
        "b": b.key,
        "share": pair.share,
        "share_a": pair.share_b if flip else pair.share_a,
        "share_b": pair.share_a if flip else pair.share_b,
        "matched_tokens": pair.matched,
        "fragments": [
            {
                "tokens": f.tokens,
                "a": _excerpt(a, f.b if flip else f.a),
                "b": _excerpt(b, f.a if flip else f.b),
            }
            for f in pair.fragments
        ],
    }


def _excerpt(doc: match.Doc, span: tuple[int, int]) -> dict[str, Any]:
    first, last = span
    shown = doc.lines[first - 1 : min(last, first + FRAGMENT_LINES - 1)]
    text = "\n".join(line if len(line) <= LINE_CHARS else line[:LINE_CHARS] + "…" for line in shown)
    return {"first": first, "last": last, "text": text, "cut": last - first + 1 > len(shown)}


def section(
    *,
    pairs: list[dict[str, Any]],
    cards: Iterable[tuple[str, AnyCard]],
    unread: list[str] | None = None,
    settings: match.Settings = DEFAULT,
) -> dict[str, Any]:
    """The ``similarity`` object of the summary (schema ``summary``)."""
    groups, common = answers.groups(cards)
    return {
        "note": NOTE,
        "settings": {
            "k": settings.k,
            "threshold": settings.threshold,
            "min_tokens": settings.min_tokens,
            "min_tokens_large": settings.min_tokens_large or settings.min_tokens,  # a number always
            "common_min": settings.common_min,
            "common_fraction": settings.common_fraction,
            "few": answers.FEW,
            "min_tests": answers.MIN_TESTS,
        },
        "pairs_found": len(pairs),
        "pairs": pairs[:MAX_PAIRS],
        "unread": sorted(unread or []),
        "same_wrong_answers": groups,
        "common_wrong_answers": common,
    }


def compute(
    *,
    entries: Iterable[tuple[str, Path]],
    cards: Iterable[tuple[str, AnyCard]],
    assignment: manifest.Assignment,
    exercise_ids: Iterable[str] | None = None,
) -> dict[str, Any]:
    """Both kinds of evidence for a class: its code (``entries``) and its scorecards (``cards``)."""
    pairs, unread = code_pairs(entries=entries, assignment=assignment, exercise_ids=exercise_ids)
    return section(pairs=pairs, cards=cards, unread=unread)
