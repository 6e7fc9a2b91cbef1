"""Pairs of submissions that share code, per exercise: k-grams of normalised tokens, given and common code left out.

Each submission's exercise code is a token stream (:mod:`grader.similarity.code`); every run of ``k`` tokens is a
fingerprint. Fingerprints of the code every student was given (the exercise's stub: signatures, asserts, the
``raise NotImplementedError``) are never evidence, nor are those that more than ``common`` submissions share (the
class's common code: the three lines everyone writes for a softmax, as MOSS's ``-m`` leaves out). What is left is a
student's *own* code. A pair's share, for each side, is the part of its own tokens that lie in fingerprints the other
side has too; a pair is listed when the smaller share reaches ``threshold`` and at least ``min_tokens`` tokens match.

Pairs are found from an inverted index (fingerprint -> submissions), never by comparing every pair: a class of 1,000
costs what its shared fingerprints cost. Every fingerprint (no winnowing): submissions are small, and the exact
share is what the report shows. Settings were chosen on the plagiarism corpus of ``benchmarks/similarity.py``.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from grader.similarity.code import Token, tokens


@dataclass(frozen=True)
class Settings:
    k: int = 10  # tokens per fingerprint
    threshold: float = 0.6  # smaller share of own code matched, for a pair to be listed
    min_tokens: int = 30  # matched tokens at least (a few shared lines prove nothing)
    common_fraction: float = (
        0.05  # a fingerprint more than this share of the class has is common code...
    )
    common_min: int = 4  # ... or more than this many submissions (small classes)
    candidate_df: int = 12  # pairs are found from fingerprints at most this many submissions share
    fragments: int = 6  # matched fragments kept per pair
    idf: bool = False  # weigh each fingerprint by log(n / submissions that have it), else 1

    def common(self, n: int) -> int:
        """How many submissions may share a fingerprint before it counts as common code."""
        return max(self.common_min, math.ceil(self.common_fraction * n))


@dataclass
class Doc:
    """One submission's code for one exercise."""

    key: str
    tokens: list[Token]
    lines: list[str]  # the source's lines, for fragments
    hashes: list[int] = field(
        default_factory=list
    )  # hashes[i]: the fingerprint starting at token i
    own: set[int] = field(default_factory=set)  # fingerprints neither given nor common
    own_weight: float = 0.0  # the weight of its own fingerprints, position by position


@dataclass(frozen=True)
class Fragment:
    a: tuple[int, int]  # first and last line in submission a
    b: tuple[int, int]
    tokens: int


@dataclass(frozen=True)
class Pair:
    a: Doc
    b: Doc
    share_a: float  # the part of a's own tokens matched in b
    share_b: float
    matched: int  # tokens of a matched (the smaller side's count is at least min_tokens)
    fragments: list[Fragment]

    @property
    def share(self) -> float:
        return min(self.share_a, self.share_b)


def doc(
    key: str,
    source: str,
    lines: set[int] | None = None,
    keep: frozenset[str] = frozenset(),
    attrs: frozenset[str] = frozenset(),
) -> Doc:
    """``source``'s code (only ``lines`` when given) as one side of a comparison (``keep``, ``attrs``: names kept as
    they are, :func:`grader.similarity.code.tokens`)."""
    return Doc(key, tokens(source, lines, keep, attrs), source.splitlines())


def fingerprints(toks: list[Token], k: int) -> list[int]:
    texts = tuple(t.text for t in toks)
    return [hash(texts[i : i + k]) for i in range(len(texts) - k + 1)]


def compare(docs: list[Doc], given: list[Token], settings: Settings = Settings()) -> list[Pair]:
    """The pairs of ``docs`` (one exercise) above the threshold, highest share first; ``given``: the stub's tokens."""
    k = settings.k
    boiler = set(fingerprints(given, k))
    for doc in docs:
        doc.hashes = fingerprints(doc.tokens, k)
        doc.own = set(doc.hashes) - boiler
    df = Counter(h for doc in docs for h in doc.own)
    limit = settings.common(len(docs))
    n = len(docs)
    weight = {h: math.log(n / c) if settings.idf else 1.0 for h, c in df.items() if c <= limit}
    for doc in docs:
        doc.own = {h for h in doc.own if h in weight}
        doc.own_weight = sum(weight.get(h, 0.0) for h in doc.hashes)
    pairs = []
    for i, j in _candidates(docs, df, min(limit, settings.candidate_df)):
        pair = _pair(docs[i], docs[j], settings, weight)
        if pair is not None:
            pairs.append(pair)
    return sorted(pairs, key=lambda p: (-p.share, p.a.key, p.b.key))


def _candidates(docs: list[Doc], df: Counter[int], most: int) -> list[tuple[int, int]]:
    """Pairs of documents that share at least one own fingerprint that few others have."""
    postings: dict[int, list[int]] = defaultdict(list)
    for index, doc in enumerate(docs):
        for h in doc.own:
            if 2 <= df[h] <= most:
                postings[h].append(index)
    found: set[tuple[int, int]] = set()
    for members in postings.values():
        found.update((a, b) for n, a in enumerate(members) for b in members[n + 1 :])
    return sorted(found)


def _covered(doc: Doc, wanted: set[int], k: int) -> set[int]:
    """Token positions inside a fingerprint of ``wanted``."""
    return {p for i, h in enumerate(doc.hashes) if h in wanted for p in range(i, i + k)}


def _pair(a: Doc, b: Doc, settings: Settings, weight: dict[int, float]) -> Pair | None:
    shared = a.own & b.own
    matched_a, matched_b = _covered(a, shared, settings.k), _covered(b, shared, settings.k)
    if (
        min(len(matched_a), len(matched_b)) < settings.min_tokens
        or not a.own_weight
        or not b.own_weight
    ):
        return None
    share_a = sum(weight[h] for h in a.hashes if h in shared) / a.own_weight
    share_b = sum(weight[h] for h in b.hashes if h in shared) / b.own_weight
    if min(share_a, share_b) < settings.threshold:
        return None
    return Pair(
        a,
        b,
        round(share_a, 3),
        round(share_b, 3),
        len(matched_a),
        fragments(a, b, shared, settings.k)[: settings.fragments],
    )


def fragments(a: Doc, b: Doc, shared: set[int], k: int) -> list[Fragment]:
    """Matched stretches, longest first: consecutive fingerprints of ``a`` found consecutively in ``b``."""
    where_b: dict[int, int] = {}
    for j, h in enumerate(b.hashes):
        if h in shared:
            where_b.setdefault(h, j)
    runs: list[tuple[int, int, int]] = []  # (start in a, start in b, fingerprints)
    for i, h in enumerate(a.hashes):
        found = where_b.get(h)
        if found is None:
            continue
        j = found
        if runs and runs[-1][0] + runs[-1][2] == i and runs[-1][1] + runs[-1][2] == j:
            start_a, start_b, n = runs[-1]
            runs[-1] = (start_a, start_b, n + 1)
        else:
            runs.append((i, j, 1))
    out = []
    for i, j, n in sorted(runs, key=lambda r: -r[2]):
        span = n + k - 1
        out.append(Fragment(_lines(a.tokens[i : i + span]), _lines(b.tokens[j : j + span]), span))
    return _distinct(out)


def _lines(toks: list[Token]) -> tuple[int, int]:
    """The student's lines a stretch of tokens covers (canonical order may differ from the file's)."""
    return min(t.line for t in toks), max(t.end for t in toks)


def _distinct(fragments: list[Fragment]) -> list[Fragment]:
    """Fragments whose lines in ``a`` do not overlap a longer one's."""
    kept: list[Fragment] = []
    for f in fragments:
        if all(f.a[1] < g.a[0] or f.a[0] > g.a[1] for g in kept):
            kept.append(f)
    return kept
