"""The idiom: code that honest authors write the same way on their own, known before any class is
graded.

A class of 200 shows its own common code (the fingerprints many of its students share,
:mod:`match`); a class of 4 cannot: there, the ``nn.Linear`` setup and the softmax line everyone
writes would pair independent students. So a small class also leaves out the fingerprints that at
least ``MIN_AUTHORS`` different authors of the course's honest code wrote: the reference
(``solutions/``) and the independently written solutions beside the manifest (:data:`AUTHORS`: each
folder one author), read from the course checkout like the references, never installed.

Only what two authors share is idiom: the reference's own code is never left out, so a copy of the
reference is still a copy (measured in ``benchmarks/similarity.py``: the small-class rows).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from grader.similarity import code, match

MIN_AUTHORS = 2  # a fingerprint this many authors wrote on their own is idiom
# beside the manifest: the reference, then folders of one author each
# (tests/corpus/independent/README.md)
REFERENCE = "solutions"
AUTHORS = ("tests/corpus/independent", "tests/corpus/honest")


def sources(root: Path, module: str) -> list[str]:
    """Each author's ``module`` beside the manifest at ``root``, the reference first (absent ones
    left out)."""
    folders = [root / REFERENCE]
    for parent in AUTHORS:
        if (root / parent).is_dir():
            folders += sorted(p for p in (root / parent).iterdir() if p.is_dir())
    files = [folder / f"{module}.py" for folder in folders]
    return [f.read_text("utf-8", errors="replace") for f in files if f.is_file()]


def fingerprints(
    texts: list[str], given: list[code.Token], keep: frozenset[str], attrs: frozenset[str], k: int
) -> frozenset[int]:
    """The fingerprints (``k`` tokens) of ``texts`` (one author each) that ``MIN_AUTHORS`` of them
    have, past the given code."""
    boiler = {h for h, _, _ in match.fingerprints(given, k)}
    count: dict[int, int] = {}
    for text in texts:
        for h in {h for h, _, _ in match.fingerprints(code.tokens(text, None, keep, attrs), k)}:
            count[h] = count.get(h, 0) + 1
    return frozenset(h for h, n in count.items() if n >= MIN_AUTHORS and h not in boiler)


@lru_cache(maxsize=64)
def of_course(
    root: Path,
    module: str,
    given: tuple[code.Token, ...],
    keep: frozenset[str],
    attrs: frozenset[str],
    k: int,
) -> frozenset[int]:
    """:func:`fingerprints` of the course at ``root`` for ``module`` (read once per process)."""
    return fingerprints(sources(root, module), list(given), keep, attrs, k)
