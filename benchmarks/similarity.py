"""Code similarity on a generated plagiarism corpus: precision, recall and time, ours beside PyPI ``copydetect``.

The class (:mod:`benchmarks.plagiarism`): every student writes each exercise from a base many share (the reference
solutions of both assignments, every corpus bug, the example classes' students) with choices of their own; a share
of them copy some exercises from another student and disguise them (renamed identifiers, reordered functions and
statements, comments and whitespace, inlined or extracted helpers, loops <-> comprehensions, equivalent torch
calls). A pair (student, student, exercise) is a true copy when both modules have the same origin.

Detectors, each given the exercise's stub as the code every student was given:

- ``default``: :mod:`grader.similarity` with its default settings (normalised tokens, every k-gram, the class's
  common code left out, containment share, pairs by prefix filtering, 60 matched tokens above 80 submissions);
  ``exhaustive``: the same with 30 tokens at every size (``match.EXHAUSTIVE``); ``before``: issue 31's first
  settings (``match.BEFORE``). ``match.CANDIDATE`` (the default until 2026-11-28) has no row here;
  docs/performance.md gives its figures. Small classes (where the course's idiom is left out too) are measured by
  ``benchmarks/plagiarism_small.py``;
- ``ours (canonical)``: the same, code read in canonical form first (:mod:`grader.similarity.canon`: equivalent
  torch calls, loops, temporaries, statement order); measured worse, so left off in the product;
- ``copydetect``: the library as it is meant to be used (pygments filter, winnowing, the stubs as boilerplate, every
  pair compared), a pair's score the smaller of its two similarities;
- ``copydetect+common``: the same, with the fingerprints more than ``Settings.common`` submissions share added to
  the boilerplate (what ours does), to tell the normaliser's part from the common-code rule's.

Thresholds are chosen on one class (seed 0: the highest recall at precision 0.95 at least, else the best
F1) and measured on another (seed 1): precision
and recall at the chosen threshold, recall per disguise, and the time of the whole pass (reading excluded) for 200
and 1,000 submissions. Copydetect compares every pair, so its 1,000-submission time is measured on one exercise and
scaled by the number of exercises (printed as such).

    python benchmarks/similarity.py [--sizes 200 1000] [--copy-rate 0.1] [--assignment attention-basics]

``--shipped-threshold``: ours at each setting's shipped threshold instead; ``--explain-fp``: the flagged pairs
that are not copies, by their students' bases (:mod:`similarity_fp`).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import plagiarism  # noqa: E402
import similarity_fp  # noqa: E402

# the detectors, the ground truth and the threshold tuning
from similarity_detectors import (  # noqa: E402
    Maker,
    as_class,
    bases,
    best_threshold,
    copydetect,
    false_positives,
    figures,
    ours,
    truth,
)

from grader.course import manifest  # noqa: E402
from grader.similarity import match  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--assignment", default="attention-basics")
    parser.add_argument("--sizes", type=int, nargs="+", default=[200, 1000])
    parser.add_argument("--copy-rate", type=float, default=0.1)
    parser.add_argument("--no-copydetect", action="store_true")
    parser.add_argument("--no-disguises", action="store_true", help="skip the recall per disguise")
    parser.add_argument(
        "--disguise-size",
        type=int,
        help="students per class of the recall per disguise (default: the first size)",
    )
    parser.add_argument(
        "--large-seed",
        type=int,
        default=3,
        help="the class of each size after the first (not tuned on)",
    )
    parser.add_argument(
        "--explain-fp",
        action="store_true",
        help="the flagged pairs that are not copies, by their students' bases (similarity_fp)",
    )
    parser.add_argument(
        "--shipped-threshold",
        action="store_true",
        help="ours at each setting's shipped threshold, not one tuned on seed 0",
    )
    parser.add_argument("--min-tokens", type=int, default=match.Settings().min_tokens)
    parser.add_argument(
        "--canonical", action="store_true", help="also the canonical form (slow; measured worse)"
    )
    args = parser.parse_args(argv)
    assignment = manifest.load(None, args.assignment)
    pool, families = bases(assignment)
    stubs = {
        e.module: (ROOT / "exercises" / f"{e.module}.py").read_text("utf-8")
        for e in assignment.exercises
    }
    settings = replace(match.BEFORE, min_tokens=args.min_tokens)
    # a detector per threshold: the threshold is chosen on every pair's score (threshold 0), then measured at it
    makers: dict[str, Maker] = {
        "before": lambda t: ours(replace(match.BEFORE, threshold=t)),
        "default": lambda t: ours(
            replace(match.Settings(), min_tokens=args.min_tokens, threshold=t)
        ),
        "exhaustive": lambda t: ours(
            replace(match.EXHAUSTIVE, min_tokens=args.min_tokens, threshold=t)
        ),
    }
    if args.canonical:
        makers["ours (canonical)"] = lambda t: ours(replace(settings, threshold=t), canonical=True)
    if not args.no_copydetect and importlib.util.find_spec("copydetect") is None:
        print("copydetect is not installed: compared alone (pip install copydetect to compare it)")
    elif not args.no_copydetect:
        makers.update(
            {
                "copydetect": lambda t: copydetect(None),
                "copydetect+common": lambda t: copydetect(settings),
            }
        )
    n = args.sizes[0]
    print(
        f"{args.assignment}: {len(stubs)} exercises, bases per exercise {min(map(len, pool.values()))}-"
        f"{max(map(len, pool.values()))}, {n} students, {args.copy_rate:.0%} copiers"
    )
    tune = plagiarism.make_class(pool, n, families=families, copy_rate=args.copy_rate, seed=0)
    test = plagiarism.make_class(pool, n, families=families, copy_rate=args.copy_rate, seed=1)
    t_pos, m_pos = truth(tune), truth(test)
    total = len(stubs) * n * (n - 1) // 2
    print(
        f"true copied (pair, exercise): {len(m_pos[0])} of {total}; independent work (two families: the "
        f"reference's, or one of the {len(set(families[next(iter(families))])) - 1} authors): "
        f"{total - len(m_pos[0]) - len(m_pos[1])}; same family, not scored: {len(m_pos[1])}"
    )
    names = (
        similarity_fp.labels({e.module: e.id for e in assignment.exercises}, families)
        if args.explain_fp
        else None
    )
    chosen: dict[str, float] = {}
    cpus: dict[str, float] = {}
    shipped = {
        "before": match.BEFORE.threshold,
        "default": match.Settings().threshold,
        "exhaustive": match.EXHAUSTIVE.threshold,
    }
    for name, make in makers.items():
        chosen[name] = (
            shipped[name]
            if args.shipped_threshold and name in shipped
            else best_threshold(make(0.0)(as_class(tune), stubs), t_pos)
        )
        t0, c0 = time.perf_counter(), time.process_time()
        scores = make(chosen[name])(as_class(test), stubs)
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
        p, r, f1 = figures(scores, m_pos, chosen[name])
        cpus[name] = cpu
        ratio = f", {cpu / cpus['before']:.2f}x before's" if name != "before" else ""
        print(
            f"{name:18} threshold {chosen[name]:.3f}  precision {p:.3f}  recall {r:.3f}  F1 {f1:.3f}  "
            f"FP {false_positives(scores, m_pos, chosen[name])}  time {elapsed:.2f} s (CPU {cpu:.2f} s{ratio}) for {n}"
        )
        if names is not None and name in shipped:
            similarity_fp.explain(test, scores, m_pos[0], chosen[name], names)
        if name in shipped and chosen[name] != shipped[name]:
            p, r, f1 = figures(make(0.0)(as_class(test), stubs), m_pos, shipped[name])
            print(
                f"{'':18} at the shipped threshold {shipped[name]:.3f}: precision {p:.3f}  recall {r:.3f}"
            )
    if not args.no_disguises:
        per_disguise(
            (pool, families), stubs, makers, chosen, args.disguise_size or n, args.copy_rate
        )
    for size in args.sizes[1:]:
        timing(
            (pool, families), stubs, makers, chosen, size, args.copy_rate, args.large_seed, names
        )


Pool = tuple[dict[str, list[str]], dict[str, list[int]]]
COMBINATIONS = [
    ["rename", "reorder_statements"],
    ["rename", "comments", "torch_calls"],
    ["rename", "extract_inline", "loops"],
    ["rename", "reorder_functions", "helper", "torch_calls"],
    sorted(plagiarism.DISGUISES),
]


def per_disguise(
    pool: Pool,
    stubs: dict[str, str],
    makers: dict[str, Maker],
    chosen: dict[str, float],
    n: int,
    rate: float,
) -> None:
    print(
        "recall per disguise (every copy made with exactly these disguises; precision in brackets; "
        "FP: independent pairs flagged):"
    )
    for kinds in [[k] for k in plagiarism.DISGUISES] + COMBINATIONS:
        klass = plagiarism.make_class(
            pool[0], n, families=pool[1], copy_rate=rate, seed=2, kinds=kinds, exact=True
        )
        positives = truth(klass)
        row, recall = [], {}
        for name, make in makers.items():
            scores = make(chosen[name])(as_class(klass), stubs)
            p, recall[name], _ = figures(scores, positives, chosen[name])
            row.append(
                f"{name} {recall[name]:.3f} ({p:.3f}, FP {false_positives(scores, positives, chosen[name])})"
            )
        label = "+".join(kinds) if len(kinds) < len(plagiarism.DISGUISES) else "all together"
        print(f"  {label:44} " + "  ".join(row) + _ratio(recall))


def _ratio(recall: dict[str, float]) -> str:
    """the default's recall over before's."""
    if "default" not in recall or "before" not in recall:
        return ""
    return (
        f"  default/before {recall['default'] / recall['before']:.2f}x" if recall["before"] else ""
    )


def timing(
    pool: Pool,
    stubs: dict[str, str],
    makers: dict[str, Maker],
    chosen: dict[str, float],
    size: int,
    rate: float,
    seed: int,
    names: dict[str, list[str]] | None = None,
) -> None:
    students = plagiarism.make_class(pool[0], size, families=pool[1], copy_rate=rate, seed=seed)
    positives = truth(students)
    print(f"class of {size} (seed {seed}), each at its threshold chosen at the first size:")
    cpus = {}
    for name, make in makers.items():
        one = stubs if not name.startswith("copydetect") else dict(list(stubs.items())[:1])
        t0, c0 = time.perf_counter(), time.process_time()
        scores = make(chosen[name])(as_class(students), one)
        elapsed = (time.perf_counter() - t0) * (len(stubs) / len(one))
        cpu = (time.process_time() - c0) * (len(stubs) / len(one))
        note = "" if one is stubs else f" (1 exercise measured, x{len(stubs)})"
        if one is stubs:
            p, r, _ = figures(scores, positives, chosen[name])
            note = f"  precision {p:.3f}  recall {r:.3f}  FP {false_positives(scores, positives, chosen[name])}"
        cpus[name] = cpu
        ratio = (
            f"  CPU {cpu / cpus['before']:.2f}x before's"
            if "before" in cpus and name != "before"
            else ""
        )
        print(f"{name:18} {size} submissions: {elapsed:.1f} s (CPU {cpu:.1f} s){note}{ratio}")
        if names is not None and one is stubs:
            similarity_fp.explain(students, scores, positives[0], chosen[name], names)


if __name__ == "__main__":
    main()
