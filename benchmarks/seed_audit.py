"""Which corpus bugs get a different verdict on different seeds: each grading draws fresh inputs, and a submission
should keep its score (and the set of tests it fails) whatever the draw.

Every bug of ``tests/corpus/buggy/<exercise>/`` replaces its module in the reference solutions, and its exercise's
hidden (or public) suite runs in this process once per seed, as ``tests/project/testing/test_seed_stability.py`` does for
the bugs already found. Prints each bug whose score or failed tests move, with the tests that moved; the reference
solutions are checked too. A minute or two per assignment and seed.

    python benchmarks/seed_audit.py [--assignment ID] [--exercise ID ...] [--bug PATTERN ...] [--suite public] [--seeds 101-108]
        [--json]
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(
    0, str(ROOT)
)  # the project's test helpers (tests.project.conftest) copy the solutions

from grader.course import manifest  # noqa: E402
from grader.scoring.points import exercise_scores  # noqa: E402
from grader.scoring.runner import run_suites  # noqa: E402

REFERENCE = "(reference)"


def outcomes(
    spec: manifest.Assignment,
    exercise: manifest.Exercise,
    bug: Path | None,
    suite: str,
    seeds: list[int],
) -> tuple[dict[int, float], dict[str, dict[int, str]]]:
    """({seed: score}, {test: {seed: outcome}}) of ``exercise`` with ``bug`` as its module (None: the reference)."""
    from tests.project.support.common import solutions_copy

    scores: dict[int, float] = {}
    tests: dict[str, dict[int, str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        sub = solutions_copy(Path(tmp) / "sub")
        if bug is not None:
            shutil.copy(bug, sub / f"{exercise.module}.py")
        for seed in seeds:
            files = [
                spec.root / (exercise.hidden_tests if suite == "hidden" else exercise.public_tests)
            ]
            results, _ = run_suites(files, student=sub, seed=seed, assignment=spec)
            scores[seed] = next(
                s.score for s in exercise_scores(results, spec) if s.id == exercise.id
            )
            for r in results:
                tests.setdefault(r.name, {})[seed] = r.outcome
    return scores, tests


def audit(
    spec: manifest.Assignment,
    exercise: manifest.Exercise,
    suite: str,
    seeds: list[int],
    patterns: list[str] | None = None,
) -> list[dict]:
    """One row per bug (and the reference) whose verdict moves between ``seeds``; with
    ``patterns``, only the bugs whose names match one of them (the reference is left out)."""
    rows = []
    bugs = sorted((ROOT / "tests" / "corpus" / "buggy" / exercise.id).glob("*.py"))
    if patterns:
        bugs = [b for b in bugs if any(fnmatch.fnmatchcase(b.stem, p) for p in patterns)]
    for bug in [*([] if patterns else [None]), *bugs]:
        scores, tests = outcomes(spec, exercise, bug, suite, seeds)
        moved = {
            name: dict(Counter(by_seed.values()))
            for name, by_seed in tests.items()
            if len(set(by_seed.values())) > 1
        }
        name = f"{exercise.id}/{bug.stem if bug else REFERENCE}"
        print(
            f"  {name}: {sorted(set(scores.values()))}" + (f" moved: {moved}" if moved else ""),
            file=sys.stderr,
        )
        if moved or len(set(scores.values())) > 1:
            rows.append({"bug": name, "scores": sorted(set(scores.values())), "moved": moved})
    return rows


def seed_range(text: str) -> list[int]:
    """``101-108`` or ``3,5,9``."""
    if "-" in text:
        lo, hi = (int(x) for x in text.split("-", 1))
        return list(range(lo, hi + 1))
    return [int(x) for x in text.split(",")]


def main(argv: list[str] | None = None) -> int:
    import torch

    torch.set_num_threads(
        1
    )  # small tensors, many suites: OpenMP's threads only spin (2-5x slower beside other work)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--assignment", help="an assignment's id (default: every assignment of the manifest)"
    )
    p.add_argument("--exercise", action="append", help="audit only this exercise (repeatable)")
    p.add_argument(
        "--bug",
        action="append",
        help="audit only the bugs whose names match this pattern (fnmatch, repeatable)",
    )
    p.add_argument("--suite", choices=("hidden", "public"), default="hidden")
    p.add_argument(
        "--seeds",
        type=seed_range,
        default=seed_range("101-108"),
        help="a range (101-108) or a list (3,5,9)",
    )
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = p.parse_args(argv)
    specs = [manifest.load(assignment=args.assignment)] if args.assignment else manifest.load_all()
    chosen = [
        (s, e) for s in specs for e in s.exercises if not args.exercise or e.id in args.exercise
    ]
    rows = [row for spec, ex in chosen for row in audit(spec, ex, args.suite, args.seeds, args.bug)]
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print(
            f"{len(chosen)} exercises, {args.suite} suites, seeds {args.seeds}: {len(rows)} verdicts moved"
        )
        for row in rows:
            print(f"{row['bug']}: scores {row['scores']}; tests that moved: {row['moved']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
