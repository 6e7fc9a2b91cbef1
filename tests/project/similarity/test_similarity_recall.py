"""The disguises that cost recall before issue 31's work: a renamed, a reordered and a padded copy are flagged with
the share they really have; two independently written solutions are not; hostile input is still read.

Oracles: copies made here from the reference by hand (each disguise's effect on the token stream is known: a
renaming changes nothing, padding adds tokens only to the copy), the independently written corpus
(``tests/corpus/independent``: no shared origin) and the released stub.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from grader.course import manifest
from grader.similarity import idiom, match, source, summary
from tests.project.support.common import CORPUS, ROOT

ASSIGNMENT = manifest.load(None, "attention-basics")
[EXERCISE] = source.exercises(ASSIGNMENT, ["causal_attention"])
REFERENCE = (ROOT / "solutions" / "causal_attention.py").read_text("utf-8")


def _doc(key: str, text: str) -> match.Doc:
    return match.doc(key, text, keep=EXERCISE.keep, attrs=EXERCISE.attrs)


def _pairs(
    *docs: tuple[str, str], settings: match.Settings = match.BEFORE
) -> dict[tuple[str, str], match.Pair]:
    found = match.compare([_doc(k, t) for k, t in docs], EXERCISE.given, settings)
    return {(p.a.key, p.b.key): p for p in found}


def _renamed(text: str) -> str:
    for old, new in {
        "queries": "q_1",
        "keys": "k_2",
        "values": "v3",
        "scores": "s",
        "weights": "w",
    }.items():
        text = re.sub(rf"\b{old}\b", new, text)
    return text


def test_a_renamed_copy_is_the_same_code():
    [pair] = _pairs(("ref", REFERENCE), ("copy", _renamed(REFERENCE))).values()
    assert (pair.share_a, pair.share_b, pair.share) == (1.0, 1.0, 1.0)


def test_a_copy_with_its_statements_reordered_keeps_its_share():
    lines = REFERENCE.splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if "self.W_query = " in line)
    lines[first], lines[first + 2] = lines[first + 2], lines[first]  # W_query <-> W_value
    at = next(i for i, line in enumerate(lines) if "queries = self.W_query(x)" in line)
    lines[at], lines[at + 1] = lines[at + 1], lines[at]  # queries <-> keys
    [pair] = _pairs(("ref", REFERENCE), ("copy", "".join(lines))).values()
    plain = match.compare(
        [_doc("ref", REFERENCE), _doc("copy", "".join(lines))], EXERCISE.given, match.BEFORE
    )
    # only the runs of tokens across the four moved lines' edges are lost, on either score
    assert 0.85 <= pair.share < 1.0 and [p.share for p in plain] == [pair.share]


def test_padding_cannot_dilute_a_copy():
    junk = "".join(f"        pad_{i} = [{i} * 7 + {i + 3} * 11, {i} % 5]\n" for i in range(40))
    padded = REFERENCE.replace(
        "        return weights @ values", junk + "        return weights @ values"
    )
    [pair] = _pairs(("ref", REFERENCE), ("padded", padded), settings=match.CANDIDATE).values()
    # all of the reference's own code is in the padded copy, but for the runs across the junk's edge...
    assert 0.95 <= pair.share_a < 1.0
    assert pair.share_b < 0.5  # ...which is mostly junk,
    assert pair.share == pair.share_a  # and the pair's share is the smaller submission's
    assert match.BEFORE.threshold > min(pair.share_a, pair.share_b)  # the old score missed it


def test_independent_solutions_are_not_paired():
    authors = sorted(p for p in (CORPUS / "independent").iterdir() if p.is_dir())
    docs = [(p.name, (p / "causal_attention.py").read_text("utf-8")) for p in authors]
    assert len(docs) == 3
    assert _pairs(("ref", REFERENCE), *docs) == {}
    scored = match.compare(
        [_doc(k, t) for k, t in [("ref", REFERENCE), *docs]],
        EXERCISE.given,
        replace(match.CANDIDATE, threshold=0.0, min_tokens=0),
        _idiom(),
    )
    assert max((p.share for p in scored), default=0.0) < match.CANDIDATE.threshold


def _idiom() -> frozenset[int]:
    return idiom.of_course(
        ASSIGNMENT.root, EXERCISE.module, tuple(EXERCISE.given), EXERCISE.keep, EXERCISE.attrs, 10
    )


def test_a_class_of_four_honest_authors_pairs_no_one_but_a_copy_of_the_reference():
    """A class of 4 has no common code of its own: without the course's idiom, the nn.Linear setup everyone writes
    pairs the reference with ben; with it, no one. A renamed copy of the reference is still the same code."""
    every = [(p.name, p) for p in sorted((CORPUS / "independent").iterdir()) if p.is_dir()]
    entries = [("reference", ROOT / "solutions"), *every]
    pairs, _ = summary.code_pairs(entries=entries, assignment=ASSIGNMENT, settings=match.CANDIDATE)
    assert pairs == []
    [self_attention] = source.exercises(ASSIGNMENT, ["self_attention"])
    docs = [
        match.doc(
            k,
            (p / "self_attention.py").read_text("utf-8"),
            None,
            self_attention.keep,
            self_attention.attrs,
        )
        for k, p in entries
    ]
    bare = {
        (p.a.key, p.b.key): p.share
        for p in match.compare(docs, self_attention.given, replace(match.CANDIDATE, idiom=False))
    }
    assert bare == {("reference", "ben"): 0.56}  # the idiom alone, above the threshold
    docs = [_doc("reference", REFERENCE), _doc("copy", _renamed(REFERENCE)), _doc("ana", "")]
    docs[2] = _doc("ana", (every[0][1] / "causal_attention.py").read_text("utf-8"))
    [pair] = match.compare(docs, EXERCISE.given, match.CANDIDATE, _idiom())
    assert (pair.a.key, pair.b.key, pair.share_a, pair.share_b) == ("reference", "copy", 1.0, 1.0)
    assert match.CANDIDATE.small(4) and not match.CANDIDATE.small(200)


@pytest.mark.parametrize(
    "hostile",
    [
        REFERENCE * 400,  # ~1 MB: read on its first MAX_TOKENS tokens
        REFERENCE.replace("return weights", "return \x00weights"),  # a NUL byte
        "def f(x):\n    return "
        + "(" * 5000
        + "x"
        + ")" * 5000
        + "\n",  # deeper than the parser goes
        "x = [" * 200 + "]" * 200 + "\n" + REFERENCE,
    ],
    ids=["huge", "nul", "deep", "deep-then-code"],
)
def test_hostile_submissions_are_compared_without_raising(hostile):
    found = _pairs(("ref", REFERENCE), ("hostile", hostile), ("copy", _renamed(REFERENCE)))
    assert found[("ref", "copy")].share == 1.0  # the hostile one hides nothing
    for pair in found.values():
        assert 0.0 <= pair.share_b <= 1.0 and 0.0 <= pair.share_a <= 1.0
        for frag in pair.fragments:
            assert frag.tokens >= 1 and frag.a[0] <= frag.a[1] and frag.b[0] <= frag.b[1]
