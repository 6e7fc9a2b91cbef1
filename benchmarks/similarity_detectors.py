"""The detectors of ``benchmarks/similarity.py`` and what they are scored against.

The bases students write from (:func:`bases`: the reference's family and the authors of
``tests/corpus/independent``), the ground truth of a generated class (:func:`truth`), the
detectors (:func:`ours`: :mod:`grader.similarity`; :func:`copydetect`: PyPI ``copydetect``), and
the figures and threshold tuning (:func:`figures`, :func:`best_threshold`,
:func:`false_positives`). Imported by ``similarity.py`` and ``plagiarism_small.py``, which set
``sys.path`` first.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import plagiarism

from grader.course import manifest
from grader.intake import submission as intake
from grader.similarity import code, idiom, match

ROOT = Path(__file__).resolve().parents[1]

Scores = dict[tuple[str, str, str], float]  # (a, b, module) -> score, a < b
Detector = Callable[[dict[str, dict[str, str]], dict[str, str]], Scores]
Maker = Callable[[float], Detector]  # the detector listing pairs at a threshold


AUTHORS = (
    ROOT / "tests" / "corpus" / "independent"
)  # hand-written solutions of three authors (its README)


def bases(assignment: manifest.Assignment) -> tuple[dict[str, list[str]], dict[str, list[int]]]:
    """Per module: the bases students start from, and the family of each (the index of its author).

    Family 0 is the reference's: the solution, every corpus bug (the solution with one mistake) and every example
    student (all made from the solution). Families 1-3 are the authors of ``tests/corpus/independent``, who wrote
    their own code: two students of different families did independent work."""
    pool: dict[str, list[str]] = {}
    family: dict[str, list[int]] = {}
    for ex in assignment.exercises:
        found = [
            ROOT / "solutions" / f"{ex.module}.py",
            *sorted((ROOT / "tests/corpus/buggy" / ex.id).glob("*.py")),
        ]
        pool[ex.module] = [p.read_text("utf-8") for p in found]
    for klass in ("submissions", "submissions-modern"):
        for path in sorted((ROOT / "examples" / klass).iterdir()):
            try:
                sub = intake.take(path, modules=set(pool))
            except intake.IntakeError:
                continue
            for module in pool:
                f = sub.box / f"{module}.py"
                if (
                    f.is_file()
                    and not sub.single_module
                    and "NotImplementedError" not in f.read_text("utf-8")
                ):
                    pool[module].append(f.read_text("utf-8"))
            sub.cleanup()
    for module in pool:
        family[module] = [0] * len(pool[module])
        for n, author in enumerate(sorted(p for p in AUTHORS.iterdir() if p.is_dir()), 1):
            if (author / f"{module}.py").is_file():
                pool[module].append((author / f"{module}.py").read_text("utf-8"))
                family[module].append(n)
    return pool, family


def ours(settings: match.Settings, canonical: bool = False) -> Detector:
    """:mod:`grader.similarity` as shipped (``canonical``: with the canonical form of :mod:`grader.similarity.canon`,
    which the shipped comparison leaves off)."""

    def doc(key: str, source: str, keep: frozenset[str], attrs: frozenset[str]) -> match.Doc:
        return match.Doc(
            key, code.tokens(source, None, keep, attrs, canonical=canonical), source.splitlines()
        )

    def run(klass: dict[str, dict[str, str]], stubs: dict[str, str]) -> Scores:
        scores: Scores = {}
        for module, stub in stubs.items():
            keep, attrs = (
                code.prescribed_names(stub),
                code.given_names(stub),
            )  # as grader.similarity.source
            docs = [
                doc(key, mods[module], keep, attrs) for key, mods in klass.items() if module in mods
            ]
            given = doc("", stub, keep, attrs).tokens
            common = (
                idiom.of_course(ROOT, module, tuple(given), keep, attrs, settings.k)
                if settings.small(len(docs))
                else frozenset()
            )
            for pair in match.compare(docs, given, settings, common):
                scores[(*sorted((pair.a.key, pair.b.key)), module)] = pair.share  # type: ignore[index]
        return scores

    return run


def copydetect(common: match.Settings | None) -> Detector:
    from copydetect import CodeFingerprint, compare_files  # heavy: numpy, matplotlib

    def fingerprint(source: str, boiler: list[int]) -> CodeFingerprint:
        return CodeFingerprint("x.py", 25, 1 + 30 - 25, boiler, fp=io.StringIO(source))

    def run(klass: dict[str, dict[str, str]], stubs: dict[str, str]) -> Scores:
        import numpy as np

        scores: Scores = {}
        for module, stub in stubs.items():
            boiler = list(fingerprint(stub, []).hashes)
            keys = [k for k in klass if module in klass[k]]
            prints = [fingerprint(klass[k][module], boiler) for k in keys]
            if common is not None:
                df: dict[int, int] = {}
                for fp in prints:
                    for h in fp.hashes:
                        df[h] = df.get(h, 0) + 1
                limit = common.common(len(prints))
                boiler += [h for h, n in df.items() if n > limit]
                prints = [
                    fingerprint(klass[k][module], np.array(sorted(set(boiler)))) for k in keys
                ]
            for i in range(len(keys)):
                for j in range(i + 1, len(keys)):
                    _, (s1, s2), _ = compare_files(prints[i], prints[j])
                    if min(s1, s2) > 0.2:
                        scores[(*sorted((keys[i], keys[j])), module)] = min(s1, s2)  # type: ignore[index]
        return scores

    return run


Truth = tuple[
    set[tuple[str, str, str]], set[tuple[str, str, str]]
]  # copied pairs; same-family pairs (not scored)


def truth(students: list[plagiarism.Student]) -> Truth:
    """The copied (pair, exercise)s, and the pairs made independently from one family (the reference, its corpus
    bugs and the example students; or one author): those two modules are the same code up to a line and the
    choices :func:`plagiarism.independent` makes (names, equivalent calls), so no detector can tell them from a
    copy; they are neither counted right nor wrong. Every other pair (two families) is independent work."""
    copied, same_family = set(), set()
    for i, a in enumerate(students):
        for b in students[i + 1 :]:
            for m in a.modules:
                key = (*sorted((a.key, b.key)), m)
                if a.origin[m] == b.origin[m]:
                    copied.add(key)
                elif a.family[m] == b.family[m]:
                    same_family.add(key)
    return copied, same_family  # type: ignore[return-value]


def figures(scores: Scores, truth: Truth, threshold: float) -> tuple[float, float, float]:
    positives, ignored = truth
    flagged = {p for p, s in scores.items() if s >= threshold} - ignored
    tp = len(flagged & positives)
    precision = tp / len(flagged) if flagged else 1.0
    recall = tp / len(positives) if positives else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def best_threshold(scores: Scores, positives: Truth, precision: float = 0.95) -> float:
    """The threshold of the highest recall at ``precision`` at least (none reaches it: the best F1)."""
    grid = [round(0.2 + 0.025 * i, 3) for i in range(33)]
    fit = [t for t in grid if figures(scores, positives, t)[0] >= precision]
    if fit:
        return max(fit, key=lambda t: (figures(scores, positives, t)[1], t))
    return max(grid, key=lambda t: (figures(scores, positives, t)[2], -t))


def as_class(students: list[plagiarism.Student]) -> dict[str, dict[str, str]]:
    return {s.key: s.modules for s in students}


def false_positives(scores: Scores, truth: Truth, threshold: float) -> int:
    positives, ignored = truth
    return len({p for p, s in scores.items() if s >= threshold} - ignored - positives)
