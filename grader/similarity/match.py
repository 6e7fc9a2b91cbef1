"""Pairs of submissions that share code, per exercise: k-grams of normalised tokens, given and
common code left out.

Each submission's exercise code is a token stream (:mod:`grader.similarity.code`); every run of
``k`` tokens is a fingerprint. Fingerprints of the code every student was given (the exercise's
stub: signatures, asserts, the ``raise NotImplementedError``) are never evidence, nor are those that
more than ``common`` submissions share (the class's common code: the three lines everyone writes for
a softmax, as MOSS's ``-m`` leaves out). What is left is a student's *own* code. A pair's share, for
each side, is the part of its own tokens that lie in fingerprints the other side has too; a pair's
share is the smaller submission's (containment: junk added to a copy cannot dilute it, as the
smaller of the two shares could be), and a pair is listed when it reaches ``threshold`` and at least
``min_tokens`` tokens match on each side (``min_tokens_large`` above 80 submissions).

Pairs are found from an inverted index (fingerprint -> submissions), never by comparing every pair:
each submission looks up only its rarest fingerprints, enough that a pair sharing none of them
cannot reach ``threshold`` (prefix filtering), so no pair that could be listed is missed at any
class size. Every fingerprint (no winnowing): submissions are small, and the exact share is what the
report shows. Settings were chosen on the plagiarism corpus of ``benchmarks/similarity.py``.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from grader.similarity.code import Token, tokens

MIN_STATEMENT = 5  # tokens: a shorter statement (``return V ;``) is no fingerprint of its own


@dataclass(frozen=True)
class Settings:
    """What a pair must show to be listed (the shipped defaults, chosen on the benchmarks
    ``similarity.py`` and ``plagiarism_small.py``; :data:`BEFORE`: issue 31's first)."""

    k: int = 10  # tokens per fingerprint
    threshold: float = 0.55  # share matched, for a pair to be listed
    min_tokens: int = 30  # matched tokens at least (a few shared lines prove nothing)
    # ... above 80 submissions (honest pairs at 1,000 match 34-37 tokens, median, copies 75-78:
    # docs/performance.md, 2026-11-28); None: ``min_tokens`` at every size
    min_tokens_large: int | None = 60
    common_fraction: float = 0.1  # a fingerprint in more than this share of a class: common code...
    common_min: int = 8  # ... or more than this many submissions (small classes)
    candidate_df: int = 12  # without ``prefix``: pairs from fingerprints at most this many share
    fragments: int = 6  # matched fragments kept per pair
    idf: bool = False  # weigh each fingerprint by log(n / submissions that have it), else 1
    containment: bool = True  # a pair's share: the smaller submission's (padding cannot dilute it)
    statements: bool = False  # fingerprints never cross a statement: measured worse at k = 10
    idiom: bool = True  # a small class also leaves out the course's idiom (grader.similarity.idiom)
    # pairs from each side's rarest fingerprints: every pair that can reach the threshold, at any
    # size (a fixed ``candidate_df`` misses most copies at 1,000, where over 12 honest students
    # share a line); with ``min_tokens_large`` it keeps precision (docs/performance.md)
    prefix: bool = True

    def common(self, n: int) -> int:
        """How many submissions may share a fingerprint before it counts as common code."""
        return max(self.common_min, math.ceil(self.common_fraction * n))

    def least(self, n: int) -> int:
        """Matched tokens a pair needs in a class of ``n``."""
        if self.min_tokens_large is None or self.common_fraction * n <= self.common_min:
            return self.min_tokens
        return self.min_tokens_large

    def small(self, n: int) -> bool:
        """With ``idiom``: a class too small to show its own common code (the limit is
        ``common_min``, not its share), where the course's idiom is left out too. A bigger class
        measured better without it."""
        return self.idiom and self.common_fraction * n <= self.common_min


# Issue 31's first settings (the smaller of the two shares, common code > 5%/4, pairs from
# fingerprints 12 share)
BEFORE = Settings(
    threshold=0.6,
    common_fraction=0.05,
    common_min=4,
    containment=False,
    idiom=False,
    prefix=False,
    min_tokens_large=None,
)
# CANDIDATE: the default until 2026-11-28 (pairs from fingerprints 12 share at most: recall 0.28
# at 1,000); EXHAUSTIVE: prefix filtering, 30 tokens at every size (precision 0.78-0.86 at 1,000)
CANDIDATE = Settings(prefix=False, min_tokens_large=None)
EXHAUSTIVE = Settings(min_tokens_large=None)


@dataclass
class Doc:
    """One submission's code for one exercise."""

    key: str
    tokens: list[Token]
    lines: list[str]  # the source's lines, for fragments
    hashes: list[int] = field(default_factory=list)  # the fingerprints, in the order of the code
    spans: list[tuple[int, int]] = field(default_factory=list)  # hashes[i]'s tokens [a, b)
    own: set[int] = field(default_factory=set)  # fingerprints neither given nor common
    own_weight: float = 0.0  # the weight of its own fingerprints, position by position
    mass: dict[int, float] = field(default_factory=dict)  # own fingerprint -> weight, all spots


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
    matched: int  # tokens matched on the side with fewer (at least min_tokens)
    fragments: list[Fragment]
    containment: bool = True

    @property
    def share(self) -> float:
        """The smaller submission's share (containment), else the smaller share."""
        return (
            max(self.share_a, self.share_b) if self.containment else min(self.share_a, self.share_b)
        )


def doc(
    key: str,
    source: str,
    lines: set[int] | None = None,
    keep: frozenset[str] = frozenset(),
    attrs: frozenset[str] = frozenset(),
) -> Doc:
    """``source``'s code (only ``lines`` when given) as one side of a comparison (``keep``,
    ``attrs``: names kept as they are, :func:`grader.similarity.code.tokens`)."""
    return Doc(key, tokens(source, lines, keep, attrs), source.splitlines())


def fingerprints(toks: list[Token], k: int, statements: bool = False) -> list[tuple[int, int, int]]:
    """``(hash, first, end)`` of every run of ``k`` tokens; ``statements``: runs inside one
    statement only, and a statement shorter than ``k`` as one fingerprint, so that statements moved
    around keep their fingerprints."""
    texts = tuple(t.text for t in toks)
    if not statements:
        return [(hash(texts[i : i + k]), i, i + k) for i in range(len(texts) - k + 1)]
    out: list[tuple[int, int, int]] = []
    start = 0
    for end in [i + 1 for i, t in enumerate(texts) if t == ";"] + [len(texts)]:
        if end - start >= k:
            out += [(hash(texts[i : i + k]), i, i + k) for i in range(start, end - k + 1)]
        elif end - start >= MIN_STATEMENT:
            out.append((hash(texts[start:end]), start, end))
        start = end
    return out


def compare(
    docs: list[Doc],
    given: list[Token],
    settings: Settings = Settings(),
    idiom: frozenset[int] = frozenset(),
) -> list[Pair]:
    """The pairs of ``docs`` (one exercise) above the threshold, highest share first; ``given``: the
    stub's tokens; ``idiom``: fingerprints left out too when the class is :meth:`Settings.small`."""
    k = settings.k
    boiler = {h for h, _, _ in fingerprints(given, k, settings.statements)}
    if settings.small(len(docs)):
        boiler |= idiom
    for doc in docs:
        found = fingerprints(doc.tokens, k, settings.statements)
        doc.hashes, doc.spans = [h for h, _, _ in found], [(a, b) for _, a, b in found]
        doc.own = set(doc.hashes) - boiler
    df = Counter(h for doc in docs for h in doc.own)
    limit = settings.common(len(docs))
    n = len(docs)
    weight = {h: math.log(n / c) if settings.idf else 1.0 for h, c in df.items() if c <= limit}
    for doc in docs:
        doc.own = {h for h in doc.own if h in weight}
        doc.mass = {h: c * weight[h] for h, c in Counter(doc.hashes).items() if h in weight}
        doc.own_weight = sum(doc.mass.values())
    candidates = (
        _prefix_candidates(docs, df, settings.threshold)
        if settings.prefix
        else _candidates(docs, df, min(limit, settings.candidate_df))
    )
    pairs = []
    least = settings.least(n)
    for i, j in candidates:
        pair = _pair(docs[i], docs[j], settings, least)
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


def _prefix_candidates(
    docs: list[Doc], df: Counter[int], threshold: float
) -> list[tuple[int, int]]:
    """Every pair whose share can reach ``threshold`` (prefix filtering, as in similarity joins): a
    side's share is below it unless the other side has one of its rarest own fingerprints, those
    that weigh more than ``1 - threshold`` of it. Exact at any class size, and cheap: common
    fingerprints are last, seldom looked up."""
    postings: dict[int, list[int]] = defaultdict(list)
    for index, doc in enumerate(docs):
        for h in doc.own:
            if df[h] >= 2:
                postings[h].append(index)
    found: set[tuple[int, int]] = set()
    for index, doc in enumerate(docs):
        for h in _prefix(doc, df, threshold):
            found.update((min(index, o), max(index, o)) for o in postings.get(h, ()) if o != index)
    return sorted(found)


def _prefix(doc: Doc, df: Counter[int], threshold: float) -> list[int]:
    """``doc``'s rarest own fingerprints, until those left weigh less than ``threshold`` of it (less
    0.001: shares are rounded to 3 places)."""
    left, out = doc.own_weight, []
    for h in sorted(doc.mass, key=lambda h: (df[h], h)):
        if left < (threshold - 0.001) * doc.own_weight:
            break
        out.append(h)
        left -= doc.mass[h]
    return out


def _covered(doc: Doc, wanted: set[int]) -> set[int]:
    """Token positions inside a fingerprint of ``wanted``."""
    return {p for h, (a, b) in zip(doc.hashes, doc.spans) if h in wanted for p in range(a, b)}


def _pair(a: Doc, b: Doc, settings: Settings, least: int) -> Pair | None:
    """The pair, if its share reaches the threshold and ``least`` tokens match (costly parts last)."""
    shared = a.own & b.own
    if not a.own_weight or not b.own_weight:
        return None
    share_a = round(min(sum(a.mass[h] for h in shared) / a.own_weight, 1.0), 3)
    share_b = round(min(sum(b.mass[h] for h in shared) / b.own_weight, 1.0), 3)
    share = max(share_a, share_b) if settings.containment else min(share_a, share_b)
    if share < settings.threshold:
        return None
    matched = min(len(_covered(a, shared)), len(_covered(b, shared)))
    if matched < least:
        return None
    frags = fragments(a, b, shared)[: settings.fragments]
    return Pair(a, b, share_a, share_b, matched, frags, settings.containment)


def fragments(a: Doc, b: Doc, shared: set[int]) -> list[Fragment]:
    """Matched stretches, longest first: consecutive fingerprints of ``a`` found consecutively in
    ``b``."""
    where_b: dict[int, int] = {}
    for j, h in enumerate(b.hashes):
        if h in shared:
            where_b.setdefault(h, j)
    runs: list[tuple[int, int, int]] = []  # (first fingerprint in a, in b, fingerprints)
    for i, h in enumerate(a.hashes):
        found = where_b.get(h)
        if found is None:
            continue
        j = found
        if runs and runs[-1][0] + runs[-1][2] == i and runs[-1][1] + runs[-1][2] == j:
            runs[-1] = (runs[-1][0], runs[-1][1], runs[-1][2] + 1)
        else:
            runs.append((i, j, 1))
    out = []
    for i, j, n in runs:
        (a0, _), (_, a1) = a.spans[i], a.spans[i + n - 1]
        (b0, _), (_, b1) = b.spans[j], b.spans[j + n - 1]
        out.append(Fragment(_lines(a.tokens[a0:a1]), _lines(b.tokens[b0:b1]), a1 - a0))
    return _distinct(sorted(out, key=lambda f: -f.tokens))


def _lines(toks: list[Token]) -> tuple[int, int]:
    """The student's lines a stretch of tokens covers (canonical order may differ from the
    file's)."""
    return min(t.line for t in toks), max(t.end for t in toks)


def _distinct(fragments: list[Fragment]) -> list[Fragment]:
    """Fragments whose lines in ``a`` do not overlap a longer one's."""
    kept: list[Fragment] = []
    for f in fragments:
        if all(f.a[1] < g.a[0] or f.a[0] > g.a[1] for g in kept):
            kept.append(f)
    return kept
