"""Small classes: honest pairs flagged in classes of 4, 10 and the whole honest corpus, and copies still found.

The honest corpus: the reference (``solutions/``), the three authors of ``tests/corpus/independent`` and every
folder of ``tests/corpus/honest`` (attention-basics; pairs known to share an origin left out: the single-file
homework is the reference cut into one file, and two folders share simple_attention's author). In a class this
small :mod:`grader.similarity.idiom` leaves out what two authors of that corpus wrote alike, so measuring it on the
corpus itself would be circular: each class is compared with the idiom of the authors *not* in it (held out;
the whole corpus: each pair with the idiom of every other author), beside the shipped defaults without it.

Copies (the circularity the other way: the reference is part of the idiom's corpus): classes of 4, 10 and 40 from
``benchmarks/plagiarism.py`` (30% copiers, seeds 0-9), compared with ``match.Settings()`` (the idiom of the whole course),
recall over all copies and over the copies of the reference's family.

    python benchmarks/plagiarism_small.py
"""

from __future__ import annotations

import random
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import plagiarism  # noqa: E402
import similarity_detectors  # noqa: E402

from grader.course import manifest  # noqa: E402
from grader.similarity import idiom, match, source  # noqa: E402

KNOWN = {
    ("reference", "single_file_homework"),
    ("sdp_shared_helper_module", "simple_imports_own_softmax"),
}
ASSIGNMENT = manifest.load(None, "attention-basics")


def honest_class() -> list[source.Exercise]:
    entries = [("reference", ROOT / "solutions")]
    for parent in idiom.AUTHORS:
        entries += [(p.name, p) for p in sorted((ROOT / parent).iterdir()) if p.is_dir()]
    found = source.exercises(ASSIGNMENT)
    source.read_class(entries, found)
    return found


def held_out(ex: source.Exercise, leave: set[str], k: int) -> frozenset[int]:
    """The idiom of every author but ``leave`` (the single-file homework is the reference's)."""
    gone = leave | ({"single_file_homework"} if "reference" in leave else set())
    folders = [("reference", ROOT / "solutions")]
    for parent in idiom.AUTHORS:
        folders += [(p.name, p) for p in sorted((ROOT / parent).iterdir()) if p.is_dir()]
    texts = [
        (f / f"{ex.module}.py").read_text("utf-8")
        for key, f in folders
        if key not in gone and (f / f"{ex.module}.py").is_file()
    ]
    return idiom.fingerprints(texts, ex.given, ex.keep, ex.attrs, k)


def flagged(
    found: list[source.Exercise], keys: set[str], settings: match.Settings, use: bool
) -> list[str]:
    out = []
    for ex in found:
        docs = [d for d in ex.docs if d.key in keys]
        common = held_out(ex, keys, settings.k) if use else frozenset()
        out += _honest(ex.id, match.compare(docs, ex.given, settings, common))
    return out


def _honest(exercise: str, pairs: list[match.Pair]) -> list[str]:
    keys = [tuple(sorted((p.a.key, p.b.key))) for p in pairs]
    return [
        f"{exercise} {a}/{b} {p.share:.3f}" for (a, b), p in zip(keys, pairs) if (a, b) not in KNOWN
    ]


def whole(found: list[source.Exercise], settings: match.Settings, use: bool) -> list[str]:
    """The whole corpus as one class (small: under ``common_min / common_fraction``), each pair held out."""
    out = []
    for ex in found:
        everyone = match.compare(ex.docs, ex.given, replace(settings, threshold=0.0, min_tokens=0))
        for a, b in {(p.a.key, p.b.key) for p in everyone}:
            common = held_out(ex, {a, b}, settings.k) if use else frozenset()
            pairs = match.compare(ex.docs, ex.given, settings, common)
            out += _honest(ex.id, [p for p in pairs if {p.a.key, p.b.key} == {a, b}])
    return out


def copies(n: int, settings: match.Settings) -> tuple[int, int, int, int, int]:
    """Copies found (all, of the reference's family) and independent pairs flagged, over seeds 0-9."""
    pool, families = similarity_detectors.bases(ASSIGNMENT)
    stubs = {
        e.module: (ROOT / "exercises" / f"{e.module}.py").read_text("utf-8")
        for e in ASSIGNMENT.exercises
    }
    found = total = ref_found = ref_total = fp = 0
    for seed in range(10):
        klass = plagiarism.make_class(pool, n, families=families, copy_rate=0.3, seed=seed)
        positives, ignored = similarity_detectors.truth(klass)
        scores = similarity_detectors.ours(settings)(similarity_detectors.as_class(klass), stubs)
        hit = {p for p, s in scores.items() if s >= settings.threshold}
        family = {s.key: s.family for s in klass}
        ref = {p for p in positives if family[p[0]][p[2]] == 0}
        found, total = found + len(hit & positives), total + len(positives)
        ref_found, ref_total = ref_found + len(hit & ref), ref_total + len(ref)
        fp += len(hit - positives - ignored)
    return found, total, ref_found, ref_total, fp


def main() -> None:
    candidate = match.Settings()
    found = honest_class()
    keys = sorted({d.key for ex in found for d in ex.docs})
    rng = random.Random(0)
    classes = {
        "4 (reference, ana, ben, chen)": [{"reference", "ana", "ben", "chen"}],
        "4 (60 random)": [set(rng.sample(keys, 4)) for _ in range(60)],
        "10 (30 random)": [set(rng.sample(keys, 10)) for _ in range(30)],
    }
    print(
        f"honest corpus: {len(keys)} submissions; honest pairs flagged (threshold {candidate.threshold}):"
    )
    for label, draws in classes.items():
        row = [sum(len(flagged(found, d, candidate, use)) for d in draws) for use in (False, True)]
        print(f"  class of {label:30} without idiom {row[0]:3}   with held-out idiom {row[1]:3}")
    for use in (False, True):
        pairs = whole(found, candidate, use)
        print(
            f"  whole corpus ({len(keys)}), {'held-out idiom' if use else 'without idiom'}: {len(pairs)}"
        )
        for p in pairs:
            print(f"      {p}")
    print("copies in small classes (30% copiers, seeds 0-9, the shipped defaults):")
    for n in (4, 10, 40):
        got, total, ref_got, ref_total, fp = copies(n, candidate)
        print(
            f"  {n:3} students: copies found {got}/{total} ({got / max(total, 1):.2f}), of the reference's family "
            f"{ref_got}/{ref_total} ({ref_got / max(ref_total, 1):.2f}); independent pairs flagged {fp}"
        )


if __name__ == "__main__":
    main()
