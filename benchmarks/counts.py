"""Counts per exercise of one assignment: public, hidden and CUDA tests, corpus bugs, and how many bugs are caught.

Tests are counted by pytest's own collection of the suites the manifest names (a parametrised case is one test; the
CUDA tests are part of the hidden suite, counted apart). A corpus bug (``tests/corpus/buggy/<exercise>/*.py``) is
caught when the reference solutions with that one module replaced lose points on its exercise, graded in this
process on the hidden suite as ``tests/project/testing/test_corpus.py`` does (``--no-grade`` skips it: a few minutes).

    python benchmarks/counts.py [--assignment attention-modern] [--no-grade] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the project's test helpers (tests.project.conftest) grade the bugs

from grader.course import manifest  # noqa: E402
from grader.scoring.runner import run_suites  # noqa: E402

COLUMNS = ("public", "hidden", "cuda", "bugs", "caught")


def collected(spec: manifest.Assignment, suite: str) -> dict[str, tuple[int, int]]:
    """{exercise: (tests, of which CUDA)} by pytest's collection of the suite's files."""
    results, _ = run_suites(spec.suite_files(suite), extra_args=["--collect-only"], assignment=spec)
    counts: dict[str, tuple[int, int]] = {}
    for r in results:
        tests, cuda = counts.get(r.exercise or "", (0, 0))
        counts[r.exercise or ""] = (tests + 1, cuda + int(r.cuda))
    return counts


def caught(spec: manifest.Assignment, exercise: manifest.Exercise, bugs: list[Path]) -> int:
    """How many of ``bugs`` lose points on ``exercise`` (the rest of the submission: the reference solutions)."""
    from tests.project.support.common import grade_inprocess, solutions_copy

    found = 0
    for bug in bugs:
        with tempfile.TemporaryDirectory() as tmp:
            sub = solutions_copy(Path(tmp) / "sub")
            shutil.copy(bug, sub / f"{exercise.module}.py")
            score, max_score = grade_inprocess(sub, spec, exercises=[exercise.id])[exercise.id]
        found += score < max_score
        print(f"  {exercise.id}/{bug.stem}: {score:g}/{max_score:g}", file=sys.stderr)
    return found


def table(spec: manifest.Assignment, grade: bool) -> list[dict[str, object]]:
    public, hidden = collected(spec, "public"), collected(spec, "hidden")
    rows: list[dict[str, object]] = []
    for ex in spec.exercises:
        bugs = sorted((ROOT / "tests" / "corpus" / "buggy" / ex.id).glob("*.py"))
        tests, cuda = hidden.get(ex.id, (0, 0))
        rows.append(
            {
                "exercise": ex.id,
                "points": ex.points,
                "public": public.get(ex.id, (0, 0))[0],
                "hidden": tests - cuda,
                "cuda": cuda,
                "bugs": len(bugs),
                "caught": caught(spec, ex, bugs) if grade else None,
            }
        )
    total: dict[str, object] = {
        "exercise": "total",
        "points": sum(float(str(r["points"])) for r in rows),
    }
    for col in COLUMNS:
        values = [r[col] for r in rows]
        total[col] = None if None in values else sum(int(str(v)) for v in values)
    return [*rows, total]


def markdown(rows: list[dict[str, object]]) -> str:
    head = "| exercise | points | public tests | hidden tests (CPU) | CUDA tests | corpus bugs | caught |"
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        cells = [
            r["exercise"],
            f"{float(str(r['points'])):g}",
            *("—" if r[c] is None else r[c] for c in COLUMNS),
        ]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assignment", default="attention-modern")
    parser.add_argument(
        "--no-grade", action="store_true", help="count the bugs without grading them"
    )
    parser.add_argument(
        "--json", action="store_true", help="print the rows as JSON instead of a Markdown table"
    )
    args = parser.parse_args()
    rows = table(manifest.load(assignment=args.assignment), grade=not args.no_grade)
    print(json.dumps(rows, indent=2) if args.json else markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
