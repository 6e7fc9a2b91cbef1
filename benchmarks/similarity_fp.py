"""Where the flagged pairs that are not copies come from (``similarity.py --explain-fp``).

Each flagged pair that is not a true copy is told by the bases its two students wrote from: the
reference's family (the solution, a corpus bug of ``tests/corpus/buggy``, split into the first
set and the held-out ones, ``heldout*``; an example-class student) or one of the authors of
``tests/corpus/independent``. The benchmark counts a pair of two families as independent work
(a false positive when flagged) and leaves a pair of one family out of both counts; the second
precision printed counts those too, as false positives, to show what leaving them out changes.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import plagiarism

ROOT = Path(__file__).resolve().parents[1]
AUTHORS = ROOT / "tests" / "corpus" / "independent"

Key = tuple[str, str, str]


def labels(exercises: dict[str, str], families: dict[str, list[int]]) -> dict[str, list[str]]:
    """Per module (``exercises``: module -> exercise id), a label for each base, in the order of
    ``similarity_detectors.bases``: the solution, the corpus bugs (sorted), the example students,
    the authors (the authors' bases are the ones of a family above 0)."""
    out: dict[str, list[str]] = {}
    for module, ex in exercises.items():
        bugs = sorted((ROOT / "tests/corpus/buggy" / ex).glob("*.py"))
        names = ["reference"] + [
            f"{'heldout' if p.stem.startswith('heldout') else 'bug'}:{p.stem}" for p in bugs
        ]
        authors = [p.name for p in sorted(AUTHORS.iterdir()) if (p / f"{module}.py").is_file()]
        examples = len(families[module]) - len(names) - len(authors)
        out[module] = names + ["example"] * examples + [f"author:{a}" for a in authors]
    return out


def _kind(label: str) -> str:
    return label.split(":")[0]


def category(a: str, b: str, fam_a: int, fam_b: int, same_base: bool) -> str:
    """One pair's bases, as a row of the table (``a``, ``b``: their labels)."""
    if same_base:
        return f"same base ({_kind(a)})"
    if fam_a == fam_b:
        if fam_a:
            return "same author, other file"  # cannot happen: one file per author and module
        return "reference family x reference family: " + " x ".join(sorted((_kind(a), _kind(b))))
    if fam_a and fam_b:
        return "author x another author"
    ref = a if not fam_a else b
    return f"reference family ({_kind(ref)}) x author"


def explain(
    students: list[plagiarism.Student],
    scores: dict[Key, float],
    copied: set[Key],
    threshold: float,
    names: dict[str, list[str]],
    show: int = 8,
) -> None:
    """Prints the table of flagged pairs that are not copies, by their students' bases, the
    precision as the benchmark counts it and with one-family pairs counted as false positives,
    and the ``show`` highest-scored pairs of two families."""
    by_key = {s.key: s for s in students}
    rows: Counter[str] = Counter()
    cross: list[tuple[float, Key, str, str]] = []
    flagged = [p for p, s in scores.items() if s >= threshold]
    for key in flagged:
        if key in copied:
            continue
        a, b, module = key
        sa, sb = by_key[a], by_key[b]
        la, lb = names[module][sa.base[module]], names[module][sb.base[module]]
        fa, fb = sa.family[module], sb.family[module]
        rows[category(la, lb, fa, fb, sa.base[module] == sb.base[module])] += 1
        if fa != fb:
            cross.append((scores[key], key, la, lb))
    tp = sum(1 for p in flagged if p in copied)
    fp_cross = len(cross)
    fp_all = len(flagged) - tp
    disguised = sum(
        1
        for _, (a, b, m), _, _ in cross
        if by_key[a].disguises.get(m) or by_key[b].disguises.get(m)
    )
    # a copy between two students of the reference's family: left out too, for the third figure
    tp_ref = sum(1 for (a, b, m) in flagged if (a, b, m) in copied and by_key[a].family[m] == 0)
    pos_ref = sum(1 for (a, b, m) in copied if by_key[a].family[m] == 0)
    print(f"    flagged {len(flagged)}: true copies {tp}; not copies, by bases:")
    for row, count in sorted(rows.items(), key=lambda r: -r[1]):
        scored = "FP" if "x author" in row or "another author" in row else "not scored"
        print(f"      {count:5}  {row}  [{scored}]")
    p_now = tp / (tp + fp_cross) if tp + fp_cross else 1.0
    p_all = tp / len(flagged) if flagged else 1.0
    print(
        f"    precision as the benchmark counts (one-family pairs left out): {p_now:.3f} "
        f"(FP {fp_cross}, {disguised} with a disguised copy on one side); one-family pairs "
        f"counted as FP too: {p_all:.3f} (FP {fp_all})"
    )
    tp_x, pos_x = tp - tp_ref, len(copied) - pos_ref
    p_x = tp_x / (tp_x + fp_cross) if tp_x + fp_cross else 1.0
    print(
        f"    reference-family pairs left out of TP and FP alike (copies of such bases too): "
        f"precision {p_x:.3f} recall {tp_x / pos_x if pos_x else 1.0:.3f} (TP {tp_x} of {pos_x})"
    )
    for score, (a, b, module), la, lb in sorted(cross, reverse=True)[:show]:
        print(f"      {score:.3f} {module} {a} {la} / {b} {lb}")
